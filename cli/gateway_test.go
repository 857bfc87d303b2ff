package cli

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/manager"
)

// gatewayArgs are the gateway's arguments as manifests/gateway has them.
func gatewayArgs(mode string) []string {
	return []string{"gateway", "--mode=" + mode, "--eureka-url=http://eureka-0.eureka.eureka.svc:8761/eureka",
		"--audience=eurekube-gateway", "--manager-service-account=$(POD_NAMESPACE)/eurekube-manager"}
}

// gatewayDeploy is the gateway's Deployment with args and ready replicas
// of want.
func gatewayDeploy(args []string, ready, want int32) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: DefaultGatewayDeployment}}
	d.Spec.Replicas = &want
	d.Spec.Template.Spec.ServiceAccountName = "eurekube-gateway"
	d.Spec.Template.Spec.Containers = []corev1.Container{{
		Name: "gateway", Image: "eurekube/manager:v1", Args: args,
		Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}},
	}}
	d.Status.Replicas, d.Status.ReadyReplicas = want, ready
	return d
}

// parsedGateway is what readGateway makes of d.
func parsedGateway(t *testing.T, d *appsv1.Deployment) *gatewayDeployment {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	args := expandArgs(c.Args, c.Env, d)[1:]
	cfg, err := manager.ParseGatewayFlags(args, io.Discard)
	cfg.Namespace = d.Namespace
	return &gatewayDeployment{deployment: d, cfg: cfg, invalid: err}
}

// managerWith is the manager's Deployment with args, as readManager makes
// it.
func managerWith(t *testing.T, args ...string) *managerDeployment {
	t.Helper()
	cfg, ignored, err := parseManagerArgs(args, managerNS, "eurekube-manager")
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "eurekube-manager"}}
	d.Spec.Template.Spec.ServiceAccountName = "eurekube-manager"
	return &managerDeployment{deployment: d, args: args, cfg: cfg, ignored: ignored}
}

var viaGateway = []string{"--leader-elect", "--registrar-image=" + registrarV1, "--cert-dir=/certs",
	"--eureka-url=http://eurekube-gateway.eurekube-system.svc:8761/eureka",
	"--gateway-audience=eurekube-gateway", "--gateway-token-file=/var/run/secrets/eurekube.io/gateway/token"}

func TestExpandArgs_AsTheKubeletDoes(t *testing.T) {
	d := gatewayDeploy(nil, 0, 1)
	env := []corev1.EnvVar{
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "SA", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
		{Name: "MODE", Value: "enforce"},
		{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
	}
	got := expandArgs([]string{"--a=$(POD_NAMESPACE)/$(SA)", "--mode=$(MODE)", "$$(MODE)", "$(SECRET)", "$(UNSET)", "$", "a$(b"}, env, d)
	want := []string{"--a=eurekube-system/eurekube-gateway", "--mode=enforce", "$(MODE)", "$(SECRET)", "$(UNSET)", "$", "a$(b"}
	if !slices.Equal(got, want) {
		t.Errorf("expandArgs = %q, want %q", got, want)
	}
}

func TestCheckGateway_ReplicasAndFlags(t *testing.T) {
	expect(t, evaluateGateway(nil, managerNS, "eurekube-gateway", false), Warn, "Deployment eurekube-system/eurekube-gateway not found", "nothing stands between Eureka")
	expect(t, evaluateGateway(nil, managerNS, "eurekube-gateway", true), Fail, "not found", "the manager sends tokens for it", "gateway.enabled=true")
	expect(t, evaluateGateway(parsedGateway(t, gatewayDeploy(gatewayArgs("enforce"), 0, 2)), managerNS, "eurekube-gateway", true), Fail, "0/2 replicas ready", "every client that names it fails", "kubectl -n eurekube-system logs deployment/eurekube-gateway")
	expect(t, evaluateGateway(parsedGateway(t, gatewayDeploy(gatewayArgs("enforce"), 1, 2)), managerNS, "eurekube-gateway", true), Warn, "1/2 replicas ready", "fewer than 2")
	expect(t, evaluateGateway(parsedGateway(t, gatewayDeploy(gatewayArgs("enforce"), 1, 1)), managerNS, "eurekube-gateway", true), Warn, "1/1 replicas ready", "fewer than 2")
	expect(t, evaluateGateway(parsedGateway(t, gatewayDeploy(gatewayArgs("enforce"), 2, 2)), managerNS, "eurekube-gateway", true), Pass, "2/2 replicas ready, in front of http://eureka-0.eureka.eureka.svc:8761/eureka")
	expect(t, evaluateGateway(parsedGateway(t, gatewayDeploy([]string{"gateway", "--mode=enforce"}, 2, 2)), managerNS, "eurekube-gateway", true), Fail, "the gateway refuses its flags", "--eureka-url")
}

func TestCheckGatewayMode_AuditWarns(t *testing.T) {
	expect(t, evaluateGatewayMode(parsedGateway(t, gatewayDeploy(gatewayArgs(gateway.ModeAudit), 2, 2))), Warn, "audit mode lets every write through, unauthenticated ones included", "--mode=enforce")
	expect(t, evaluateGatewayMode(parsedGateway(t, gatewayDeploy(gatewayArgs(gateway.ModeEnforce), 2, 2))), Pass, "enforce")
}

func TestCheckGatewayIdentity_TheManagerAndTheGatewayAgree(t *testing.T) {
	enforce := parsedGateway(t, gatewayDeploy(gatewayArgs(gateway.ModeEnforce), 2, 2))
	audit := parsedGateway(t, gatewayDeploy(gatewayArgs(gateway.ModeAudit), 2, 2))
	expect(t, evaluateGatewayIdentity(enforce, managerWith(t, viaGateway...)), Pass, `audience "eurekube-gateway" on both sides`, "runs as eurekube-system/eurekube-manager")

	other := slices.Clone(viaGateway)
	other[4] = "--gateway-audience=eurekube-gw"
	for _, g := range []*gatewayDeployment{enforce, audit} {
		expect(t, evaluateGatewayIdentity(g, managerWith(t, other...)), Fail, `--gateway-audience "eurekube-gw" is not gateway eurekube-system/eurekube-gateway's --audience "eurekube-gateway"`, gateway.ReasonBadToken)
	}

	noAudience := []string{"--leader-elect", "--registrar-image=" + registrarV1, "--cert-dir=/certs", "--eureka-url=http://eurekube-gateway.eurekube-system.svc:8761/eureka"}
	expect(t, evaluateGatewayIdentity(enforce, managerWith(t, noAudience...)), Fail, "sets no --gateway-audience", "fix: give the manager --gateway-audience=eurekube-gateway")
	expect(t, evaluateGatewayIdentity(audit, managerWith(t, noAudience...)), Warn, "sets no --gateway-audience", "enforce mode would refuse them")

	direct := slices.Clone(viaGateway)
	direct[3] = "--eureka-url=http://eureka.eureka.svc:8761/eureka"
	expect(t, evaluateGatewayIdentity(enforce, managerWith(t, direct...)), Warn, "does not name gateway eurekube-system/eurekube-gateway's Service eurekube-gateway")
	for _, host := range []string{"eurekube-gateway", "eurekube-gateway.eurekube-system", "eurekube-gateway.eurekube-system.svc.cluster.local"} {
		direct[3] = "--eureka-url=http://" + host + ":8761/eureka"
		expect(t, evaluateGatewayIdentity(enforce, managerWith(t, direct...)), Pass, "names gateway")
	}

	elsewhere := gatewayDeploy(gatewayArgs(gateway.ModeEnforce), 2, 2)
	elsewhere.Spec.Template.Spec.Containers[0].Args[4] = "--manager-service-account=platform/eurekube-manager"
	expect(t, evaluateGatewayIdentity(parsedGateway(t, elsewhere), managerWith(t, viaGateway...)), Fail, `from ServiceAccount "platform/eurekube-manager"`, "runs as eurekube-system/eurekube-manager", "fix: set the gateway's --manager-service-account=eurekube-system/eurekube-manager")

	expect(t, evaluateGatewayIdentity(enforce, nil), Warn, "not checked")
}

// gatewayEvent is an Event as the gateway records it (events.k8s.io/v1),
// read through core/v1.
func gatewayEvent(ns, pod, reason, op string, count int32, last time.Time) corev1.Event {
	e := corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: pod + "." + strings.ToLower(reason), CreationTimestamp: metav1.NewTime(last)},
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod},
		Reason:              reason,
		Action:              op,
		Type:                corev1.EventTypeWarning,
		ReportingController: gatewayReporter,
		EventTime:           metav1.NewMicroTime(last),
		Message: "Eureka " + op + " of app ORDERS instance " + pod + "." + ns + ".0a1b2c3d:ORDERS:8080 " +
			map[string]string{gateway.EventReasonRefused: "refused", gateway.EventReasonAudited: "would be refused (audit mode lets it through)"}[reason] +
			" by Eurekube's gateway (AppOwnedByAnotherNamespace): Eureka app ORDERS belongs to namespace shop",
	}
	if count > 1 {
		e.Series = &corev1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(last)}
		e.EventTime = metav1.NewMicroTime(last.Add(-time.Duration(count) * time.Minute))
	}
	return e
}

func TestStatus_GatewayRefusalsNewestFirstCounted(t *testing.T) {
	events := []corev1.Event{
		gatewayEvent("evil", "probe-5d8f9-abcde", gateway.EventReasonRefused, gateway.OpRegister, 1, testNow.Add(-40*time.Minute)),
		gatewayEvent("evil", "probe-5d8f9-fghij", gateway.EventReasonRefused, gateway.OpRenew, 12, testNow.Add(-15*time.Second)),
		gatewayEvent("legacy", "batch-0", gateway.EventReasonAudited, gateway.OpCancel, 3, testNow.Add(-3*time.Minute)),
	}
	var out strings.Builder
	if err := printGatewayEvents(&out, events, false, testNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "status/gateway.golden.txt", out.String())

	t.Run("none prints nothing", func(t *testing.T) {
		var out strings.Builder
		if err := printGatewayEvents(&out, nil, false, testNow); err != nil || out.Len() > 0 {
			t.Errorf("no refusal printed %q (%v)", out.String(), err)
		}
	})

	t.Run("the newest 20, all with wide", func(t *testing.T) {
		var many []corev1.Event
		for i := range 25 {
			many = append(many, gatewayEvent("evil", "probe-"+string(rune('a'+i)), gateway.EventReasonRefused, gateway.OpRenew, 1, testNow.Add(-time.Duration(i)*time.Minute)))
		}
		var out strings.Builder
		if err := printGatewayEvents(&out, many, false, testNow); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 1+1+20+1 || !strings.Contains(lines[2], "probe-a ") || !strings.HasPrefix(lines[len(lines)-1], "... and 5 more") {
			t.Errorf("25 refusals without wide:\n%s", out.String())
		}
		out.Reset()
		if err := printGatewayEvents(&out, many, true, testNow); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out.String(), "\n"); n != 1+1+25 {
			t.Errorf("25 refusals with wide: %d lines\n%s", n, out.String())
		}
	})
}
