package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/manager"
)

// The gateway's checks.
const (
	checkGateway         = "gateway"
	checkGatewayMode     = "gateway-mode"
	checkGatewayIdentity = "gateway-identity"
)

// DefaultGatewayDeployment is the gateway's Deployment in manifests/ and
// in the chart for release eurekube; its Service has its name.
const DefaultGatewayDeployment = "eurekube-gateway"

// gatewayReporter is the reportingController of the gateway's Events
// (manager/gateway.go names its recorder so).
const gatewayReporter = "eurekube-gateway"

// minGatewayReplicas: with fewer ready, the gateway is one pod away from
// failing every client that names it.
const minGatewayReplicas = 2

// gatewayDeployment is the gateway as installed: its Deployment and its
// flags, parsed by the gateway's own parser.
type gatewayDeployment struct {
	deployment *appsv1.Deployment
	cfg        manager.GatewayConfig
	// invalid is what the gateway's own validation says of its flags: the
	// gateway would not start.
	invalid error
	// ignored are flags this version of the CLI does not know.
	ignored []string
}

// readGateway reads the gateway's Deployment and parses its arguments;
// nil, nil when there is none.
func readGateway(ctx context.Context, c client.Reader, namespace, name string) (*gatewayDeployment, error) {
	var d appsv1.Deployment
	if ok, err := get(ctx, c, client.ObjectKey{Namespace: namespace, Name: name}, &d); err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("read the gateway's Deployment %s/%s: %w", namespace, name, err)
		}
		return nil, err
	}
	containers := d.Spec.Template.Spec.Containers
	if len(containers) == 0 {
		return &gatewayDeployment{deployment: &d, invalid: fmt.Errorf("the Deployment %s/%s has no container", namespace, name)}, nil
	}
	ctr := containers[0]
	for _, c := range containers {
		if c.Name == "gateway" {
			ctr = c
		}
	}
	args := expandArgs(append(slices.Clone(ctr.Command[min(1, len(ctr.Command)):]), ctr.Args...), ctr.Env, &d)
	if len(args) > 0 && args[0] == manager.GatewayCommand {
		args = args[1:]
	}
	g := &gatewayDeployment{deployment: &d}
	for {
		cfg, err := manager.ParseGatewayFlags(args, io.Discard)
		if name, ok := unknownFlag(err); ok {
			g.ignored = append(g.ignored, "--"+name)
			args = slices.DeleteFunc(args, func(a string) bool { return a == "--"+name || strings.HasPrefix(a, "--"+name+"=") })
			continue
		}
		g.cfg, g.invalid = cfg, err
		// POD_NAMESPACE is the Deployment's in the cluster, not this
		// process's environment.
		g.cfg.Namespace = namespace
		return g, nil
	}
}

// unknownFlag is the name of the flag pflag did not know.
func unknownFlag(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	return strings.CutPrefix(err.Error(), "unknown flag: --")
}

// expandArgs expands $(VAR) in args as the kubelet does, for the
// variables the cluster gives the container without running it: literal
// values and the downward API's namespace, name and ServiceAccount. $$ is
// a literal $; anything else is left as written.
func expandArgs(args []string, env []corev1.EnvVar, d *appsv1.Deployment) []string {
	vars := map[string]string{}
	for _, e := range env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			vars[e.Name] = d.Namespace
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.serviceAccountName":
			vars[e.Name] = cmpOr(d.Spec.Template.Spec.ServiceAccountName, "default")
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		var b strings.Builder
		for j := 0; j < len(a); j++ {
			if a[j] != '$' || j+1 == len(a) {
				b.WriteByte(a[j])
				continue
			}
			if a[j+1] == '$' {
				b.WriteByte('$')
				j++
				continue
			}
			if a[j+1] == '(' {
				if end := strings.IndexByte(a[j+2:], ')'); end >= 0 {
					if v, ok := vars[a[j+2:j+2+end]]; ok {
						b.WriteString(v)
						j += end + 2
						continue
					}
				}
			}
			b.WriteByte(a[j])
		}
		out[i] = b.String()
	}
	return out
}

// evaluateGateway: the gateway's Deployment exists, its flags are valid,
// and at least minGatewayReplicas replicas are ready. expected: the
// manager sends a token for the gateway (its --gateway-audience), so a
// missing gateway fails its writes and the registrars'.
func evaluateGateway(g *gatewayDeployment, namespace, name string, expected bool) Finding {
	f := Finding{Check: checkGateway}
	if g == nil {
		f.Detail = fmt.Sprintf("Deployment %s/%s not found: nothing stands between Eureka and whoever reaches it", namespace, name)
		if !expected {
			f.Verdict = Warn
			f.Detail += " (docs/operations.md, \"Gateway\"; --gateway-deployment names another)"
			return f
		}
		f.Verdict = Fail
		f.Detail += ", yet the manager sends tokens for it (--gateway-audience)"
		f.Fix = "install the gateway (kubectl apply -k manifests/default, or the Helm chart with gateway.enabled=true); --gateway-deployment names another"
		return f
	}
	d := g.deployment
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	detail := fmt.Sprintf("Deployment %s/%s: %d/%d replicas ready, in front of %s", namespace, name, d.Status.ReadyReplicas, want, orDash(strings.Join(eureka.RedactAll(g.cfg.EurekaURLs), ", ")))
	if len(g.ignored) > 0 {
		detail += fmt.Sprintf(" (flags unknown to this eurekube, ignored: %s)", strings.Join(g.ignored, ", "))
	}
	switch {
	case g.invalid != nil:
		f.Verdict, f.Detail = Fail, fmt.Sprintf("Deployment %s/%s: the gateway refuses its flags: %v", namespace, name, g.invalid)
		f.Fix = fmt.Sprintf("correct the gateway's arguments (kubectl -n %s edit deployment %s; docs/operations.md, \"Gateway\")", namespace, name)
	case d.Status.ReadyReplicas == 0:
		f.Verdict, f.Detail = Fail, detail+": every client that names it fails"
		f.Fix = fmt.Sprintf("kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s", namespace, name, namespace, name)
	case d.Status.ReadyReplicas < minGatewayReplicas:
		f.Verdict, f.Detail = Warn, fmt.Sprintf("%s: fewer than %d, so one pod's loss (a node drained, a crash) fails every client that names it", detail, minGatewayReplicas)
	default:
		f.Verdict, f.Detail = Pass, detail
	}
	return f
}

// evaluateGatewayMode: enforce refuses what audit only records.
func evaluateGatewayMode(g *gatewayDeployment) Finding {
	f := Finding{Check: checkGatewayMode}
	switch g.cfg.Mode {
	case gateway.ModeEnforce:
		f.Verdict, f.Detail = Pass, "enforce: a write without an identity allowed to make it is refused and never reaches Eureka"
	default:
		f.Verdict, f.Detail = Warn, fmt.Sprintf("%s mode lets every write through, unauthenticated ones included, and only records what enforce mode would refuse (eurekube status lists them); switch to --mode=%s once no write it records is one you need", g.cfg.Mode, gateway.ModeEnforce)
	}
	return f
}

// evaluateGatewayIdentity: the manager and the registrars can prove who
// they are to the gateway. Read from both Deployments' flags: the
// manager's --gateway-audience is the gateway's --audience, the manager
// names the gateway's Service in --eureka-url (the tokens go to those
// servers alone), and the gateway's --manager-service-account is the
// manager's ServiceAccount.
func evaluateGatewayIdentity(g *gatewayDeployment, m *managerDeployment) Finding {
	f := Finding{Check: checkGatewayIdentity}
	if m == nil {
		f.Verdict, f.Detail = Warn, "not checked: the manager's Deployment was not read"
		return f
	}
	enforce := g.cfg.Mode == gateway.ModeEnforce
	// A fault that enforce mode turns into refused writes fails; in audit
	// mode it is a warning of what enforce would refuse.
	fault := func(detail, fix string) Finding {
		if enforce {
			f.Verdict, f.Detail, f.Fix = Fail, detail, fix
		} else {
			f.Verdict, f.Detail = Warn, detail+"; enforce mode would refuse them: "+fix
		}
		return f
	}
	d, mgr := g.deployment, m.deployment
	gwName := d.Namespace + "/" + d.Name
	managerSA := mgr.Namespace + "/" + cmpOr(mgr.Spec.Template.Spec.ServiceAccountName, "default")
	switch {
	case m.cfg.GatewayAudience == "":
		return fault(fmt.Sprintf("the manager (Deployment %s/%s) sets no --gateway-audience: neither it nor the registrars get a token for gateway %s, so their writes through it carry no identity", mgr.Namespace, mgr.Name, gwName),
			fmt.Sprintf("give the manager --gateway-audience=%s and --gateway-token-file with a projected token for that audience (manifests/manager/deployment.yaml)", g.cfg.Audience))
	case m.cfg.GatewayAudience != g.cfg.Audience:
		return Finding{Check: checkGatewayIdentity, Verdict: Fail,
			Detail: fmt.Sprintf("the manager's --gateway-audience %q is not gateway %s's --audience %q: the gateway refuses every token of the registrars and of the manager (%s)", m.cfg.GatewayAudience, gwName, g.cfg.Audience, gateway.ReasonBadToken),
			Fix:    "give both the same audience, and the manager's projected token volume that audience too",
		}
	case g.cfg.ManagerServiceAccount != managerSA:
		return fault(fmt.Sprintf("gateway %s takes the reconciler's writes from ServiceAccount %q (--manager-service-account), but the manager runs as %s: the manager's writes of other namespaces' apps (Service mode, Standby's overrides, orphans' cancels) are refused", gwName, g.cfg.ManagerServiceAccount, managerSA),
			fmt.Sprintf("set the gateway's --manager-service-account=%s", managerSA))
	case !namesService(m.cfg.EurekaURLs, d.Name, d.Namespace):
		f.Verdict, f.Detail = Warn, fmt.Sprintf("audience %q on both sides, but the manager's --eureka-url (%s) does not name gateway %s's Service %s: the manager sends its token, and the webhook gives registrars theirs, for those servers alone, so nothing reaches the gateway with one",
			g.cfg.Audience, orDash(strings.Join(eureka.RedactAll(m.cfg.EurekaURLs), ", ")), gwName, d.Name)
		return f
	}
	f.Verdict, f.Detail = Pass, fmt.Sprintf("audience %q on both sides; the manager names gateway %s in --eureka-url and runs as %s, whose writes the gateway takes as the reconciler's", g.cfg.Audience, gwName, managerSA)
	return f
}

// namesService is true when one of urls has the host of Service name in
// namespace: name, name.namespace, name.namespace.svc or with the
// cluster domain.
func namesService(urls []string, name, namespace string) bool {
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		host := strings.ToLower(u.Hostname())
		if host == name || host == name+"."+namespace || strings.HasPrefix(host, name+"."+namespace+".svc") {
			return true
		}
	}
	return false
}

// gatewayFindings reads the gateway's Deployment and evaluates it; m is
// the manager (nil: not read).
func gatewayFindings(ctx context.Context, c client.Reader, namespace, name string, m *managerDeployment) []Finding {
	g, err := readGateway(ctx, c, namespace, name)
	if err != nil {
		return []Finding{readFailure(checkGateway, err)}
	}
	expected := m != nil && m.cfg.GatewayAudience != ""
	out := []Finding{evaluateGateway(g, namespace, name, expected)}
	if g == nil || g.invalid != nil {
		return out
	}
	return append(out, evaluateGatewayMode(g), evaluateGatewayIdentity(g, m))
}
