package admission

import (
	"strings"
	"testing"

	"github.com/eurekube/eurekube/internal/builders"
)

// A syncer's author names their own registrar image, or their own Eureka
// server: the API server refuses the pods the syncer selects, with the
// webhook's message naming the syncer, the field, the value and how the
// platform team would allow it; no pod is created.
func TestInject_APodIsDeniedWhenItsSyncerNamesAnImageOrHostNotAllowed(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	for _, tc := range []struct {
		name   string
		option builders.SyncerOption
		want   []string
	}{
		{"registrar image", builders.RegistrarImage("attacker.example/registrar:1"),
			[]string{"EurekaSyncer ledger", `spec.sidecar.image "attacker.example/registrar:1"`, "--allowed-registrar-image", "manager.allowedRegistrarImages"}},
		{"Eureka host", builders.EurekaURLs("http://eureka.attacker.example:8761/eureka"),
			[]string{"EurekaSyncer ledger", "spec.eureka.serviceURLs[0] names host eureka.attacker.example:8761", "--allowed-eureka-host", "manager.allowedEurekaHosts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := optedInNamespace(ctx, t, "allowlist")
			createSyncer(t, builders.Syncer(ns, "ledger", tc.option))
			pod := builders.Pod(ns, "ledger", builders.Restricted())
			err := suite.c.Create(ctx, pod)
			if err == nil {
				t.Fatalf("the pod was admitted; containers: %v", containerNames(pod))
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the denial does not name %s: %v", want, err)
				}
			}
		})
	}
}
