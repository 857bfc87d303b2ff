package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// restartClusterID is the cluster id of the restart test's managers.
const restartClusterID = "restart-cluster"

// What a real cluster sees every day: the manager that made every status
// right stops (a rollout, a drained node) and a new leader starts over the
// same objects. Its passes over them write nothing: not the status, whose
// lastSyncTime an outage longer than the refresh period left old, nor an
// Event. On a control plane of its own, so that the suite's manager, which
// runs all along, is not the one that reconciles.
func TestRestart_ANewLeaderOverRightStatusesWritesNothing(t *testing.T) {
	const pods = 3
	ctx := context.Background()
	ns := newNamespace(t)
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{})
	cl := cp.Client
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	s := builders.Syncer(ns, "restarted", builders.Port(intstr.FromInt32(8080)), builders.EurekaURLs(server.URL()))
	if err := cl.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	c := directClient(t, server.URL())
	for i := range pods {
		pod := podShape{ns: ns, app: s.Name, name: fmt.Sprintf("restarted-%d", i), ip: fmt.Sprintf("10.7.0.%d", i+1), ready: true, registrar: true,
			annotations: map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusInjected, v1alpha1.SyncerAnnotation: s.Name, v1alpha1.DrainAnnotation: "100",
				v1alpha1.TrafficAnnotation: string(v1alpha1.TrafficServe)}}.createIn(t, cl)
		inst := registerAs(t, c, restartClusterID, s, pod)
		t.Cleanup(func() { _ = c.Cancel(context.Background(), inst.App, inst.InstanceID) })
	}

	stop := startRestartManager(t, cp)
	harness.Eventually(t, patience, "the first manager makes the status right", func() error {
		var got v1alpha1.EurekaSyncer
		if err := cl.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
			return err
		}
		if st := got.Status; !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced) || st.UpInstances != pods || st.LastSyncTime == nil {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	stop()

	// The manager was away longer than the refresh period: lastSyncTime
	// is an hour old when the new leader comes.
	var before v1alpha1.EurekaSyncer
	if err := cl.Get(ctx, client.ObjectKeyFromObject(s), &before); err != nil {
		t.Fatal(err)
	}
	old := before.DeepCopy()
	before.Status.LastSyncTime = &metav1.Time{Time: time.Now().Add(-time.Hour).Truncate(time.Second)}
	if err := cl.Status().Patch(ctx, &before, client.MergeFrom(old)); err != nil {
		t.Fatal(err)
	}
	events := func() []string {
		t.Helper()
		var list corev1.EventList
		if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range list.Items {
			out = append(out, fmt.Sprintf("%s %s x%d: %s", e.Type, e.Reason, e.Count, e.Message))
		}
		return out
	}
	eventsBefore := events()
	podsBefore := podVersions(t, cl, ns)

	// The new leader: its gauges appear when it has reconciled the syncer;
	// it reconciles it again at each resync.
	controller.ForgetSyncerMetrics(ns, s.Name)
	startRestartManager(t, cp)
	harness.Eventually(t, patience, "the new leader reconciles the syncer", func() error {
		g, err := gaugeSeries("eurekube_syncer_synced", func(l map[string]string) (string, bool) {
			return "", l["namespace"] == ns && l["syncer"] == s.Name
		})
		if err != nil || len(g) == 0 {
			return fmt.Errorf("no synced gauge of the syncer yet (%v)", err)
		}
		return nil
	})
	time.Sleep(3 * resync)

	var after v1alpha1.EurekaSyncer
	if err := cl.Get(ctx, client.ObjectKeyFromObject(s), &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the new leader wrote the syncer: lastSyncTime %v → %v, status %+v", before.Status.LastSyncTime, after.Status.LastSyncTime, after.Status)
	}
	if got := events(); len(got) != len(eventsBefore) {
		t.Errorf("the new leader recorded Events: before %q, after %q", eventsBefore, got)
	}
	if got := podVersions(t, cl, ns); fmt.Sprint(got) != fmt.Sprint(podsBefore) {
		t.Errorf("the new leader wrote pods: resourceVersions %v → %v", podsBefore, got)
	}
}

// startRestartManager starts a manager running the reconciler on cp, as
// cmd/manager would there, and returns what stops it (also called when
// the test ends).
func startRestartManager(t *testing.T, cp *harness.ControlPlane) (stop func()) {
	t.Helper()
	return startManagerOn(t, cp, restartClusterID, "the manager")
}

// podVersions is the resourceVersion of each pod in ns.
func podVersions(t *testing.T, cl client.Client, ns string) map[string]string {
	t.Helper()
	var list corev1.PodList
	if err := cl.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = p.ResourceVersion
	}
	return out
}
