package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// bareFinalizer is what the bench's own pass adds to every syncer, as the
// manager adds its own.
const bareFinalizer = "bench.eurekube.io/floor"

// bareSyncerWrites does, for syncers, what any controller of them cannot
// do without on its first pass over a cluster it has never seen, as the
// bench alone: it reads the whole registry once (the manager's first read
// is a full one), then, with the watches open that a controller of what it
// writes keeps (syncers and claims), makes for each syncer the writes the
// manager makes, in its order: an update adding a finalizer, a claim of
// its app, and a patch of its status. Each write changes what is stored,
// on objects of the manager's size. The syncers are listed first, for
// their resource versions, as the manager's cache holds them.
func bareSyncerWrites(ctx context.Context, env *scaleEnv, syncers []*v1alpha1.EurekaSyncer) (bareWrites, error) {
	bare := bareWrites{what: "per syncer: update it with a finalizer, create its app's claim, patch its status", count: 3 * len(syncers)}
	var list v1alpha1.EurekaSyncerList
	if err := env.k8s.List(ctx, &list); err != nil {
		return bare, fmt.Errorf("list the syncers: %w", err)
	}
	start := time.Now()
	reg, err := env.eureka.Applications(ctx)
	if err != nil {
		return bare, fmt.Errorf("read the registry: %w", err)
	}
	bare.read, bare.readInstances = time.Since(start), reg.Len()
	watching, err := watchAll(ctx, env.cp.Config, env.cp.Scheme, &v1alpha1.EurekaSyncerList{}, &v1alpha1.EurekaAppClaimList{})
	if err != nil {
		return bare, err
	}
	err = inParallel(ctx, len(list.Items), func(i int) error {
		s := list.Items[i].DeepCopy()
		controllerutil.AddFinalizer(s, bareFinalizer)
		if err := env.k8s.Update(ctx, s); err != nil {
			return fmt.Errorf("update syncer %s/%s: %w", s.Namespace, s.Name, err)
		}
		app := "BARE-" + strings.ToUpper(s.Name) + "-" + strings.ToUpper(s.Namespace)
		claim := &v1alpha1.EurekaAppClaim{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(app)},
			Spec: v1alpha1.EurekaAppClaimSpec{App: app, Namespace: s.Namespace}}
		if err := env.k8s.Create(ctx, claim); err != nil {
			return fmt.Errorf("create claim %s: %w", claim.Name, err)
		}
		// A status that differs from the stored one, so that it is
		// written.
		patch := fmt.Sprintf(`{"status":{"ready":"bench %d"}}`, i)
		target := &v1alpha1.EurekaSyncer{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}
		if err := env.k8s.Status().Patch(ctx, target, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return fmt.Errorf("patch the status of syncer %s/%s: %w", s.Namespace, s.Name, err)
		}
		return nil
	})
	bare.watches, bare.events = watching.kinds(), watching.stop()
	return bare, err
}
