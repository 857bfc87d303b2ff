package main

import (
	"strings"
	"testing"

	"github.com/eurekube/eurekube/tests/node"
)

// The sandbox shows the product: tenancy as a user's install has it, no
// share-every-app policy, so ORDERS belongs to its first registrant.
func TestSandboxOptions_InstallsNoShareEveryAppPolicy(t *testing.T) {
	if o := sandboxOptions(node.Options{LogDir: t.TempDir()}, 8761); !o.FirstClaim {
		t.Errorf("the sandbox's cluster options %+v share every app with every namespace (harness.ShareEveryApp); want FirstClaim", o)
	}
}

func TestTenancyWelcome_ShowsTheClaimAndWhatAnotherNamespaceSees(t *testing.T) {
	got := tenancyWelcome("ORDERS", "shop")
	for _, want := range []string{"No EurekaAppPolicy is installed", "ORDERS belongs to namespace shop", "kubectl get eac", "PERMITTED", "False"} {
		if !strings.Contains(strings.Join(strings.Fields(got), " "), want) {
			t.Errorf("the welcome's tenancy part does not say %q:\n%s", want, got)
		}
	}
}
