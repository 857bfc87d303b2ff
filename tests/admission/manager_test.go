package admission

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/eurekube/eurekube/manager"
)

func TestManager_WithoutAccessToKubeSystemSaysHowToSetTheClusterID(t *testing.T) {
	// A user the API server knows but grants nothing.
	user, err := suite.cp.Env.ControlPlane.AddUser(envtest.User{Name: "no-rights"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := suite.cfg
	cfg.RestConfig = user.Config()
	cfg.ClusterID = ""
	err = manager.Run(testContext(t), cfg)
	for _, want := range []string{"kube-system", "forbidden", "--cluster-id"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run without access to kube-system: %v, want an error mentioning %q", err, want)
		}
	}
}
