package selfmanaged_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/eurekube/eurekube/tests/harness"
)

// cp is the API server the manager tests share; nil in -short mode, where
// only the tests that need nothing but Go run. It enforces owner
// references' permissions, as OpenShift does: the leader sets the
// certificate Secret's owner.
var cp *harness.ControlPlane

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if cp, err = harness.StartControlPlane(context.Background(), harness.ControlPlaneOptions{
		AdmissionPlugins: []string{"OwnerReferencesPermissionEnforcement"},
	}); err != nil {
		fmt.Fprintf(os.Stderr, "selfmanaged tests: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
	}
	os.Exit(code)
}
