package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
)

const (
	checkNamespace = "check-shop"
	managerNS      = "eurekube-system"
	registrarV1    = "eurekube/registrar:v1"
	// credentialsRole is the credentials ClusterRole as the Helm chart
	// names it for a release named acme (<fullname>-eureka-credentials);
	// the chart passes it to the manager's --credentials-cluster-role.
	credentialsRole = "acme-eurekube-eureka-credentials"
)

// healthyInstall is an installation check passes on: the manager's
// Deployment (no controller runs it here, its status is written), the
// webhook's certificate in its Secret, the webhook's own handler serving
// on this machine behind the webhook configuration of manifests/, and a
// syncer with credentials and a CA bundle its namespace lets the manager
// read.
type healthyInstall struct {
	cp      *harness.ControlPlane
	ca      *certs.CA
	port    int
	secret  *corev1.Secret
	syncer  *v1alpha1.EurekaSyncer
	role    *rbacv1.ClusterRole
	binding *rbacv1.RoleBinding
	// creds: the syncer's credentials Secret, labelled with its consent.
	creds *corev1.Secret
}

func installHealthy(ctx context.Context, t *testing.T, cp *harness.ControlPlane) *healthyInstall {
	t.Helper()
	h := &healthyInstall{cp: cp}
	c := cp.Client
	createNamespace(ctx, t, cp, managerNS, false)
	createNamespace(ctx, t, cp, checkNamespace, true)

	managerArgs := []string{"--leader-elect", "--registrar-image=" + registrarV1, "--eureka-url=http://eureka:8761/eureka", "--cluster-id=check-cluster",
		"--credentials-cluster-role=" + credentialsRole}
	// The Deployment's: the manager writes through the gateway, as
	// manifests/default has it (the webhook below serves managerArgs').
	h.managerDeployment(ctx, t, h.managerArgs(registrarV1))
	h.gatewayDeployment(ctx, t, gatewayArgs(gateway.ModeEnforce), 2)

	// The webhook server: the webhook's own handler, with the defaults the
	// manager's flags give, serving the certificate of the Secret.
	var err error
	if h.ca, err = certs.NewCA("eurekube-check-ca", 0); err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	serving, err := h.ca.Rotate(certDir, certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	h.secret = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: manager.DefaultCertificateSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: serving.CertPEM, corev1.TLSPrivateKeyKey: serving.KeyPEM, "ca.crt": h.ca.PEM},
	}
	if err := c.Create(ctx, h.secret); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseManagerArgs(managerArgs, managerNS, "eurekube-manager")
	if err != nil {
		t.Fatal(err)
	}
	if h.port, err = harness.FreePort(); err != nil {
		t.Fatal(err)
	}
	server := ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: h.port, CertDir: certDir})
	server.Register(webhook.Path, &admission.Webhook{Handler: webhook.NewHandler(webhook.Options{
		Reader: c, Defaults: manager.WebhookDefaults(cfg, cfg.ClusterID), ExcludedNamespaces: []string{managerNS},
	})})
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.Start(sctx) }()
	t.Cleanup(func() { stop(); <-served })
	harness.Eventually(t, 30*time.Second, "the webhook server serves TLS", func() error { return server.StartedChecker()(nil) })
	h.installWebhook(ctx, t)

	// A syncer with credentials, consenting to their use, the RoleBinding
	// that lets the manager read them, and what the manager would have
	// found.
	h.creds = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: checkNamespace, Name: "eureka-creds",
		Labels: map[string]string{v1alpha1.EurekaCredentialsLabel: "true"}}, StringData: map[string]string{"username": "u", "password": "p"}}
	if err := c.Create(ctx, h.creds); err != nil {
		t.Fatal(err)
	}
	h.syncer = builders.Syncer(checkNamespace, "orders", builders.Credentials(h.creds.Name))
	h.syncer.Spec.Eureka.TLS = &v1alpha1.EurekaTLS{CABundleRef: &v1alpha1.CABundleRef{Name: "eureka-ca"}}
	if err := c.Create(ctx, h.syncer); err != nil {
		t.Fatal(err)
	}
	h.role = &rbacv1.ClusterRole{ // as manifests/rbac/role.yaml has it
		ObjectMeta: metav1.ObjectMeta{Name: credentialsRole},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}}},
	}
	if err := c.Create(ctx, h.role.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	h.binding = &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: checkNamespace, Name: credentialsRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: credentialsRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: managerNS, Name: "eurekube-manager"}},
	}
	h.grant(ctx, t)

	// A pod the webhook injected, through the API server.
	harness.Eventually(t, 30*time.Second, "the API server calls the webhook", func() error {
		pod := trialPod(h.syncer)
		pod.GenerateName = "orders-"
		if err := c.Create(ctx, pod); err != nil {
			return err
		}
		if !v1alpha1.RunsRegistrar(pod) {
			_ = c.Delete(ctx, pod)
			return errors.New("created without the registrar")
		}
		return nil
	})
	h.status(ctx, t, func(st *v1alpha1.EurekaSyncerStatus) {
		st.SelectedPods, st.InjectedPods = 1, 1
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionTrue, Reason: "Reachable", Message: "http://eureka:8761/eureka answered"})
	})
	return h
}

// managerDeployment creates or updates the manager's Deployment with args
// and writes a ready replica into its status.
func (h *healthyInstall) managerDeployment(ctx context.Context, t *testing.T, args []string) {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/name": "eurekube"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "eurekube-manager"}}
	_, err := controllerutilCreateOrUpdate(ctx, h.cp.Client, d, func() {
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		d.Spec.Template.Labels = labels
		d.Spec.Template.Spec.ServiceAccountName = "eurekube-manager"
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "manager", Image: "eurekube/manager:v1", Args: args}}
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Status.Replicas, d.Status.ReadyReplicas = 1, 1
	if err := h.cp.Client.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
}

// managerArgs are the manager Deployment's arguments with the registrar
// image: a manager that writes through the gateway, with its token.
func (h *healthyInstall) managerArgs(registrar string) []string {
	return []string{"--leader-elect", "--registrar-image=" + registrar, "--cluster-id=check-cluster", "--credentials-cluster-role=" + credentialsRole,
		"--eureka-url=http://eurekube-gateway.eurekube-system.svc:8761/eureka",
		"--gateway-audience=eurekube-gateway", "--gateway-token-file=/var/run/secrets/eurekube.io/gateway/token"}
}

// gatewayDeployment creates or updates the gateway's Deployment with args
// (manager.GatewayCommand first) and writes ready replicas of two into its
// status.
func (h *healthyInstall) gatewayDeployment(ctx context.Context, t *testing.T, args []string, ready int32) {
	t.Helper()
	want := gatewayDeploy(args, ready, 2)
	d := &appsv1.Deployment{ObjectMeta: want.ObjectMeta}
	_, err := controllerutilCreateOrUpdate(ctx, h.cp.Client, d, func() {
		labels := map[string]string{"app.kubernetes.io/name": "eurekube", "app.kubernetes.io/component": "gateway"}
		d.Spec.Replicas = want.Spec.Replicas
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		d.Spec.Template = want.Spec.Template
		d.Spec.Template.Labels = labels
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Status = want.Status
	if err := h.cp.Client.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
}

func controllerutilCreateOrUpdate(ctx context.Context, c client.Client, d *appsv1.Deployment, mutate func()) (bool, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
	if apierrors.IsNotFound(err) {
		mutate()
		return true, c.Create(ctx, d)
	}
	if err != nil {
		return false, err
	}
	mutate()
	return false, c.Update(ctx, d)
}

func (h *healthyInstall) installWebhook(ctx context.Context, t *testing.T) {
	t.Helper()
	if err := h.cp.InstallWebhook(ctx, harness.LocalWebhook{Port: h.port, CABundle: h.ca.PEM}); err != nil {
		t.Fatal(err)
	}
}

func (h *healthyInstall) grant(ctx context.Context, t *testing.T) {
	t.Helper()
	b := h.binding.DeepCopy()
	if err := h.cp.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
}

func (h *healthyInstall) status(ctx context.Context, t *testing.T, mutate func(*v1alpha1.EurekaSyncerStatus)) {
	t.Helper()
	var s v1alpha1.EurekaSyncer
	if err := h.cp.Client.Get(ctx, client.ObjectKeyFromObject(h.syncer), &s); err != nil {
		t.Fatal(err)
	}
	mutate(&s.Status)
	if err := h.cp.Client.Status().Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
}

// check runs eurekube check until the line verdict/check is printed and
// holds every word of want (the API server's caches, such as its webhook
// configuration, catch up within moments), and returns the output.
func (h *healthyInstall) check(t *testing.T, wantCode int, verdict, checkName string, want ...string) string {
	t.Helper()
	var out string
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("eurekube check prints %s %s", verdict, checkName), func() error {
		code, stdout, stderr := runOn(t, h.cp, "check")
		out = stdout
		line := lineOf(stdout, verdict, checkName)
		if line == "" {
			return fmt.Errorf("no %s %s line in\n%s%s", verdict, checkName, stdout, stderr)
		}
		for _, w := range want {
			if !strings.Contains(stdout, w) {
				return fmt.Errorf("%q is not in\n%s", w, stdout)
			}
		}
		if code != wantCode {
			return fmt.Errorf("exit %d, want %d\n%s%s", code, wantCode, stdout, stderr)
		}
		return nil
	})
	t.Logf("eurekube check (exit %d):\n%s", wantCode, out) // what an operator sees, for the record
	return out
}

func TestCheck_AHealthyInstallationPassesAndEachFaultIsNamed(t *testing.T) {
	cp := controlPlane(t)
	ctx := testContext(t)
	h := installHealthy(ctx, t, cp)
	c := cp.Client

	out := h.check(t, ExitOK, "PASS", checkWebhookAnswers, "came back with the eurekube-registrar container")
	for _, name := range []string{checkCRD, checkManager, checkWebhookConfig, checkWebhookCert, checkEureka, checkImports, checkCredentials, checkInjected, checkRegistrar,
		checkGateway, checkGatewayMode, checkGatewayIdentity} {
		if lineOf(out, "PASS", name) == "" {
			t.Errorf("no PASS %s line:\n%s", name, out)
		}
	}
	t.Logf("a healthy installation:\n%s", out)

	t.Run("a tenant's refused syncer", func(t *testing.T) {
		// A tenant with edit rights in its namespace names a Eureka host
		// the platform has not allowed: the manager refuses the syncer
		// (its status as the manager writes it), the webhook its pods.
		// Its namespace sorts before the healthy one's.
		tenant := "check-evil"
		createNamespace(ctx, t, cp, tenant, true)
		probe := builders.Syncer(tenant, "probe", builders.EurekaURLs("http://evil.example:8761/eureka"))
		if err := c.Create(ctx, probe); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), probe) })
		refusal := "spec.eureka.serviceURLs[0]: Eureka host evil.example:8761 is not allowed"
		setPermitted(ctx, t, c, probe, metav1.ConditionFalse, v1alpha1.ReasonEurekaHostNotAllowed, refusal,
			metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonEurekaHostNotAllowed, Message: "not contacted"})
		setPermitted(ctx, t, c, h.syncer, metav1.ConditionTrue, v1alpha1.ReasonPermitted, "allowed")

		// The dry run takes the permitted syncer's pod, and the refused
		// syncer's Eureka is not blamed on Eureka.
		h.check(t, ExitOK, "PASS", checkWebhookAnswers, "namespace "+checkNamespace+" selected by EurekaSyncer orders came back with the eurekube-registrar container",
			tenant+"/probe: refused by the platform (Permitted False, "+v1alpha1.ReasonEurekaHostNotAllowed)

		// With no permitted syncer left to try, the refused one's pod is
		// denied by policy: the webhook answered, a PASS that says so, and
		// no word of the network.
		setPermitted(ctx, t, c, h.syncer, metav1.ConditionFalse, v1alpha1.ReasonEurekaHostNotAllowed, "refused for this test")
		out := h.check(t, ExitOK, "PASS", checkWebhookAnswers, "namespace "+tenant+" selected by EurekaSyncer probe was denied by policy (the webhook works: inject.eurekube.io answered)",
			"evil.example", "EurekaSyncer probe is refused (Permitted False, "+v1alpha1.ReasonEurekaHostNotAllowed)
		if strings.Contains(lineOf(out, "PASS", checkWebhookAnswers), "network") {
			t.Errorf("a denial by policy blames the network:\n%s", out)
		}
		setPermitted(ctx, t, c, h.syncer, metav1.ConditionTrue, v1alpha1.ReasonPermitted, "allowed")
		if err := c.Delete(ctx, probe); err != nil {
			t.Fatal(err)
		}
		h.check(t, ExitOK, "PASS", checkWebhookAnswers, "selected by EurekaSyncer orders came back with the eurekube-registrar container")
	})

	t.Run("Eureka unreachable", func(t *testing.T) {
		h.status(ctx, t, func(st *v1alpha1.EurekaSyncerStatus) {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionFalse, Reason: "EurekaUnreachable", Message: "http://eureka:8761/eureka: connection refused"})
		})
		h.check(t, ExitFailure, "FAIL", checkEureka, checkNamespace+"/orders: EurekaUnreachable: http://eureka:8761/eureka: connection refused", "fix: check spec.eureka")
		h.status(ctx, t, func(st *v1alpha1.EurekaSyncerStatus) {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionTrue, Reason: "Reachable"})
		})
	})

	t.Run("credentials Secret not granted", func(t *testing.T) {
		if err := c.Delete(ctx, h.binding.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		h.check(t, ExitFailure, "FAIL", checkCredentials, "cannot get Secret "+checkNamespace+"/eureka-creds",
			"fix: kubectl -n "+checkNamespace+" create rolebinding "+credentialsRole+" --clusterrole="+credentialsRole+" --serviceaccount=eurekube-system:eurekube-manager")
		h.grant(ctx, t)
	})

	t.Run("CA bundle ConfigMap not granted", func(t *testing.T) {
		secretsOnly := h.role.DeepCopy()
		secretsOnly.Rules[0].Resources = []string{"secrets"}
		if err := c.Update(ctx, secretsOnly); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			var restored rbacv1.ClusterRole
			if err := c.Get(ctx, client.ObjectKeyFromObject(h.role), &restored); err != nil {
				t.Fatal(err)
			}
			restored.Rules = h.role.Rules
			if err := c.Update(ctx, &restored); err != nil {
				t.Fatal(err)
			}
		})
		h.check(t, ExitFailure, "FAIL", checkCredentials, "cannot get ConfigMap "+checkNamespace+"/eureka-ca (spec.eureka.tls.caBundleRef)",
			"can get Secret "+checkNamespace+"/eureka-creds (spec.eureka.credentialsSecretRef)") // still granted: a PASS line of its own
	})

	t.Run("credentials Secret without consent", func(t *testing.T) {
		setConsent := func(labels map[string]string) {
			var secret corev1.Secret
			if err := c.Get(ctx, client.ObjectKeyFromObject(h.creds), &secret); err != nil {
				t.Fatal(err)
			}
			secret.Labels = labels
			if err := c.Update(ctx, &secret); err != nil {
				t.Fatal(err)
			}
		}
		setConsent(nil)
		t.Cleanup(func() { setConsent(h.creds.Labels) })
		h.check(t, ExitFailure, "FAIL", checkCredentials, checkNamespace+"/orders: Secret "+checkNamespace+"/eureka-creds (spec.eureka.credentialsSecretRef) is not used",
			"fix: kubectl -n "+checkNamespace+" label secret eureka-creds "+v1alpha1.EurekaCredentialsLabel+"=true")
	})

	t.Run("selected pod not injected", func(t *testing.T) {
		pod := trialPod(h.syncer)
		pod.GenerateName = "orders-opted-out-"
		pod.Labels[v1alpha1.InjectLabel] = "false" // the API server does not even call the webhook
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		h.status(ctx, t, func(st *v1alpha1.EurekaSyncerStatus) { st.SelectedPods = 2 })
		h.check(t, ExitFailure, "FAIL", checkInjected, "1 selected pod(s) run without the registrar: "+checkNamespace+"/"+pod.Name, checkNamespace+"/orders 1 of 2 injected")
		if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		h.status(ctx, t, func(st *v1alpha1.EurekaSyncerStatus) { st.SelectedPods = 1 })
	})

	t.Run("outdated registrar", func(t *testing.T) {
		h.managerDeployment(ctx, t, h.managerArgs("eurekube/registrar:v2"))
		h.check(t, ExitOK, "WARN", checkRegistrar, "run an older registrar than eurekube/registrar:v2: "+checkNamespace+"/orders-")
		h.managerDeployment(ctx, t, h.managerArgs(registrarV1))
	})

	t.Run("the gateway", func(t *testing.T) {
		t.Cleanup(func() { h.gatewayDeployment(ctx, t, gatewayArgs(gateway.ModeEnforce), 2) })
		h.check(t, ExitOK, "PASS", checkGateway, "Deployment eurekube-system/eurekube-gateway: 2/2 replicas ready, in front of http://eureka-0.eureka.eureka.svc:8761/eureka")
		h.check(t, ExitOK, "PASS", checkGatewayIdentity, `audience "eurekube-gateway" on both sides`, "runs as eurekube-system/eurekube-manager")

		h.gatewayDeployment(ctx, t, gatewayArgs(gateway.ModeAudit), 2)
		h.check(t, ExitOK, "WARN", checkGatewayMode, "audit mode lets every write through, unauthenticated ones included")

		h.gatewayDeployment(ctx, t, gatewayArgs(gateway.ModeEnforce), 1)
		h.check(t, ExitOK, "WARN", checkGateway, "1/2 replicas ready", "fewer than 2, so one pod's loss")
		h.gatewayDeployment(ctx, t, gatewayArgs(gateway.ModeEnforce), 0)
		h.check(t, ExitFailure, "FAIL", checkGateway, "0/2 replicas ready", "every client that names it fails", "fix: kubectl -n eurekube-system describe deployment eurekube-gateway")

		other := gatewayArgs(gateway.ModeEnforce)
		other[3] = "--audience=someone-else"
		h.gatewayDeployment(ctx, t, other, 2)
		h.check(t, ExitFailure, "FAIL", checkGatewayIdentity, `the manager's --gateway-audience "eurekube-gateway" is not gateway eurekube-system/eurekube-gateway's --audience "someone-else"`)

		if err := c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: DefaultGatewayDeployment}}); err != nil {
			t.Fatal(err)
		}
		out := h.check(t, ExitFailure, "FAIL", checkGateway, "Deployment eurekube-system/eurekube-gateway not found", "yet the manager sends tokens for it")
		if lineOf(out, "WARN", checkGatewayMode) != "" || lineOf(out, "PASS", checkGatewayIdentity) != "" {
			t.Errorf("the checks of a gateway that is not there ran:\n%s", out)
		}
	})

	t.Run("certificate expiring", func(t *testing.T) {
		soon, err := h.ca.Issue(certs.ServingOptions{DNSNames: []string{"localhost"}, IPAddresses: certs.LocalHosts().IPAddresses, Validity: 5 * 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		h.setCertificate(ctx, t, soon.CertPEM)
		h.check(t, ExitFailure, "FAIL", checkWebhookCert, "expires in 4 days", "--cert-days 14", "fix: cert-manager renews it")
		h.setCertificate(ctx, t, h.secret.Data[corev1.TLSCertKey])
	})

	t.Run("webhook configuration without a caBundle", func(t *testing.T) {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Get(ctx, client.ObjectKey{Name: manager.DefaultWebhookConfiguration}, &mwc); err != nil {
			t.Fatal(err)
		}
		for i := range mwc.Webhooks {
			mwc.Webhooks[i].ClientConfig.CABundle = nil
		}
		if err := c.Update(ctx, &mwc); err != nil {
			t.Fatal(err)
		}
		h.check(t, ExitFailure, "FAIL", checkWebhookConfig, "webhook inject.eurekube.io has no caBundle", "fix: cert-manager's CA injector writes it")
		// Without it the API server cannot call the webhook either.
		h.check(t, ExitFailure, "FAIL", checkWebhookAnswers, "was refused")
		h.installWebhook(ctx, t)
		h.check(t, ExitOK, "PASS", checkWebhookAnswers)
	})

	t.Run("an import", func(t *testing.T) {
		imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: checkNamespace, Name: "payments"}, Spec: v1alpha1.EurekaImportSpec{App: "payments"}}
		if err := c.Create(ctx, imp); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: checkNamespace, Name: "payments"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		t.Cleanup(func() {
			// No garbage collector runs here: delete the Service too.
			for _, obj := range []client.Object{imp, svc} {
				if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
					t.Error(err)
				}
			}
		})
		importStatus := func(conditions ...metav1.Condition) {
			var cur v1alpha1.EurekaImport
			if err := c.Get(ctx, client.ObjectKeyFromObject(imp), &cur); err != nil {
				t.Fatal(err)
			}
			cur.Status.App, cur.Status.ServiceName, cur.Status.Endpoints, cur.Status.ReadyEndpoints, cur.Status.TotalEndpoints = "PAYMENTS", "payments", "2/3", 2, 3
			cur.Status.LastSyncTime = &metav1.Time{Time: time.Now()}
			for _, cond := range conditions {
				meta.SetStatusCondition(&cur.Status.Conditions, cond)
			}
			if err := c.Status().Update(ctx, &cur); err != nil {
				t.Fatal(err)
			}
		}
		// The manager has not written its status yet.
		h.check(t, ExitOK, "WARN", checkImports, checkNamespace+"/payments: not reconciled yet")

		importStatus(
			metav1.Condition{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionTrue, Reason: "Permitted"},
			metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionTrue, Reason: "Reachable"},
			metav1.Condition{Type: v1alpha1.ConditionServiceOwned, Status: metav1.ConditionTrue, Reason: "ServiceOwned"},
			metav1.Condition{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionTrue, Reason: "Imported"},
		)
		h.check(t, ExitFailure, "FAIL", checkImports, "Service "+checkNamespace+"/payments not found", "fix: the manager makes it again")

		// Someone else's Service of that name.
		if err := c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		h.check(t, ExitFailure, "FAIL", checkImports, "Service "+checkNamespace+"/payments is not this import's (no controller)")

		// The import's own, as the manager makes it.
		if err := c.Get(ctx, client.ObjectKeyFromObject(imp), imp); err != nil {
			t.Fatal(err)
		}
		yes := true
		svc.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "EurekaImport", Name: imp.Name, UID: imp.UID, Controller: &yes}}
		if err := c.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		h.check(t, ExitOK, "PASS", checkImports, checkNamespace+"/payments: Service payments, 2/3 endpoint(s) ready, synced")

		importStatus(
			metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionFalse, Reason: "EurekaUnreachable", Message: "http://eureka:8761/eureka: connection refused"},
			metav1.Condition{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse, Reason: "EurekaUnreachable", Message: "Eureka could not be read: the endpoints are kept as last read"},
		)
		h.check(t, ExitFailure, "FAIL", checkImports, checkNamespace+"/payments: EurekaUnreachable: http://eureka:8761/eureka: connection refused; Eureka could not be read: the endpoints are kept as last read",
			"fix: check spec.eureka of "+checkNamespace+"/payments")
	})

	t.Run("CRD missing", func(t *testing.T) {
		scheme, err := newScheme() // the harness's does not know CRDs
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(cp.Config, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: CRDName}, &crd); err != nil {
			t.Fatal(err)
		}
		// Without the CRD the syncers go too: keep them out of the way of
		// the finalizers' wait.
		if err := c.DeleteAllOf(ctx, &v1alpha1.EurekaSyncer{}, client.InNamespace(checkNamespace)); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, &crd); err != nil {
			t.Fatal(err)
		}
		out := h.check(t, ExitFailure, "FAIL", checkCRD, "CustomResourceDefinition eurekasyncers.eurekube.io not found", "fix: install Eurekube's CRD")
		if lineOf(out, "WARN", checkEureka) == "" || !strings.Contains(out, "not checked: cannot list EurekaSyncers") {
			t.Errorf("the checks that read syncers do not say they could not:\n%s", out)
		}
		restoreCRD(ctx, t, c, &crd)
	})
}

func (h *healthyInstall) setCertificate(ctx context.Context, t *testing.T, certPEM []byte) {
	t.Helper()
	var s corev1.Secret
	if err := h.cp.Client.Get(ctx, client.ObjectKeyFromObject(h.secret), &s); err != nil {
		t.Fatal(err)
	}
	s.Data[corev1.TLSCertKey] = certPEM
	if err := h.cp.Client.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
}

// restoreCRD creates the CRD again, once the old one is gone, and waits
// until it is established, for the tests that follow.
func restoreCRD(ctx context.Context, t *testing.T, c client.Client, old *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	fresh := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Labels: old.Labels, Annotations: old.Annotations}, Spec: old.Spec}
	harness.Eventually(t, time.Minute, "the CRD is created again", func() error {
		return c.Create(ctx, fresh.DeepCopy())
	})
	harness.Eventually(t, time.Minute, "the CRD is established again", func() error {
		var list v1alpha1.EurekaSyncerList
		return c.List(ctx, &list)
	})
}

// setPermitted writes s's Permitted condition for its current spec, and
// the other conditions, as the manager would.
func setPermitted(ctx context.Context, t *testing.T, c client.Client, s *v1alpha1.EurekaSyncer, status metav1.ConditionStatus, reason, message string, others ...metav1.Condition) {
	t.Helper()
	var got v1alpha1.EurekaSyncer
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	for _, cond := range append([]metav1.Condition{{Type: v1alpha1.ConditionPermitted, Status: status, Reason: reason, Message: message}}, others...) {
		cond.ObservedGeneration = got.Generation
		meta.SetStatusCondition(&got.Status.Conditions, cond)
	}
	if err := c.Status().Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
}
