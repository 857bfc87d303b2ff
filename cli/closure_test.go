package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// (d) The webhook admits unchanged whatever eurekube inject writes: inject
// run again over its own output (the webhook's Inject on every pod
// template, as the API server would send the pods) denies nothing and
// changes nothing, for every kind, injected or skipped.
func TestInject_ItsOwnOutputIsAdmittedUnchanged(t *testing.T) {
	for _, kind := range []string{"pod", "deployment", "statefulset", "daemonset", "replicaset", "job", "cronjob"} {
		t.Run(kind, func(t *testing.T) {
			code, first, stderr := run(t, "", injectArgs("testdata/inject/"+kind+".yaml", "--namespace=shop")...)
			if code != ExitOK {
				t.Fatalf("inject: exit %d\n%s", code, stderr)
			}
			out := filepath.Join(t.TempDir(), kind+".yaml")
			if err := os.WriteFile(out, []byte(first), 0o644); err != nil {
				t.Fatal(err)
			}
			code, second, stderr := run(t, "", injectArgs(out, "--namespace=shop")...)
			if code != ExitOK || strings.Contains(stderr, "denied") {
				t.Fatalf("inject's own output is refused: exit %d\n%s", code, stderr)
			}
			if second != first {
				t.Fatalf("inject changed its own output:\n%s\nthen\n%s", first, second)
			}
		})
	}
}

// With the manager's --gateway-audience, inject mounts the registrar's
// projected token for the gateway, as the webhook does, and its output is
// admitted back unchanged.
func TestInject_GatewayTokenAsTheWebhookMountsItAndBackUnchanged(t *testing.T) {
	args := append(injectArgs("testdata/inject/deployment.yaml", "--namespace=shop"), "--gateway-audience=eurekube-gateway")
	code, first, stderr := run(t, "", args...)
	if code != ExitOK {
		t.Fatalf("inject: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"audience: eurekube-gateway", "EUREKUBE_GATEWAY_TOKEN_FILE", "eurekube-gateway-token"} {
		if !strings.Contains(first, want) {
			t.Fatalf("inject --gateway-audience: no %q in\n%s", want, first)
		}
	}
	out := filepath.Join(t.TempDir(), "deployment.yaml")
	if err := os.WriteFile(out, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	code, second, stderr := run(t, "", append(injectArgs(out, "--namespace=shop"), "--gateway-audience=eurekube-gateway")...)
	if code != ExitOK || second != first {
		t.Fatalf("inject's own output with the gateway's token changed or was refused: exit %d\n%s\n%s", code, stderr, second)
	}
}
