package harness

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// SharedAppsPolicy is the EurekaAppPolicy that ShareEveryApp creates.
const SharedAppsPolicy = "eurekube-tests-share-every-app"

// ShareEveryApp grants every Eureka app to every namespace, as a platform
// team that shares one registry among all its teams would: the suites
// whose stories run the same app (ORDERS) in many namespaces at once are
// not about app ownership, which the first-come rule would otherwise
// decide between them. The tenancy tests remove it for their own run.
// Nothing is done where the cluster has no EurekaAppPolicy kind (an older
// release installed).
func ShareEveryApp(ctx context.Context, c client.Client) error {
	p := &v1alpha1.EurekaAppPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: SharedAppsPolicy},
		Spec: v1alpha1.EurekaAppPolicySpec{Apps: []string{"*"}, NamespaceSelector: &metav1.LabelSelector{},
			Elsewhere: v1alpha1.ElsewhereJoin},
	}
	switch err := c.Create(ctx, p); {
	case err == nil, apierrors.IsAlreadyExists(err), meta.IsNoMatchError(err):
		return nil
	default:
		return fmt.Errorf("create EurekaAppPolicy %s: %w", SharedAppsPolicy, err)
	}
}

// SuspendSharedApps deletes the ShareEveryApp policy for the rest of a
// test, and creates it again when the test ends: the tenancy tests run
// under the first-come rule and their own policies. The suite's tests
// must not run in parallel with it.
func SuspendSharedApps(ctx context.Context, t testing.TB, c client.Client) {
	t.Helper()
	shared := &v1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: SharedAppsPolicy}}
	if err := c.Delete(ctx, shared); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ShareEveryApp(context.Background(), c); err != nil {
			t.Error(err)
		}
	})
}
