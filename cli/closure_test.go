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
