package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// A service moves from a VM to the cluster, and back. CHECKOUT runs on a
// "VM" (a real Spring Boot app on the host, registered by Spring Cloud's own
// Eureka client) while a real Spring client calls it by name. Its pods come
// up in Standby: registered, OUT_OF_SERVICE from their first registration,
// so no call reaches them. Serve puts them in: they take their share. Back
// to Standby (the rollback): none again. No call fails at any switch.
func TestMigration_StandbyServeStandby_NoCallFails(t *testing.T) {
	story(t, 100*time.Second)
	ctx := context.Background()
	app := cluster.App{Namespace: "migrate", Name: "checkout", Replicas: 2, DrainSeconds: ptr.To[int32](drainSeconds),
		Traffic: v1alpha1.TrafficStandby}
	vm, err := harness.StartSpringVM(ctx, harness.SpringVMOptions{
		EurekaURL: c.Peers.DefaultZone(), App: app.Name, Name: "vm-1", Host: node.NodeIP, LogDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vm.Stop() })
	keepProcessLog(t, "vm-1", vm.Process)
	deploy(t, app, nil)

	// Standby: both pods registered and held out, the VM serving.
	waitView(t, app, "Standby: the pods held OUT_OF_SERVICE, calls go to the VM", func(st v1alpha1.EurekaSyncerStatus) error {
		if st.RegisteredInstances != 2 || st.OutOfServiceInstances != 2 || st.ElsewhereUpInstances != 1 || st.TrafficTo != v1alpha1.TrafficToElsewhere {
			return fmt.Errorf("registered %d, OUT_OF_SERVICE %d, elsewhere %s, calls to %q", st.RegisteredInstances, st.OutOfServiceInstances, st.Elsewhere, st.TrafficTo)
		}
		return trafficApplied(st, "StandingBy")
	})
	sc := startClient(t, app.Name)
	waitAnswered(t, sc, harness.SpringStats{}, []string{"vm-1"})
	start := sc.StatsT(t)
	standby := callsWithoutPods(t, sc, app, 2*time.Minute, true)
	t.Logf("Standby: %d calls since the client started, all to the VM", standby.OK)

	// Serve: the pods take their share.
	switched := time.Now()
	setTraffic(t, app, v1alpha1.TrafficServe)
	waitView(t, app, "Serve: the pods UP beside the VM", func(st v1alpha1.EurekaSyncerStatus) error {
		if st.UpInstances != 2 || st.TrafficTo != v1alpha1.TrafficToBoth {
			return fmt.Errorf("UP %d, calls to %q", st.UpInstances, st.TrafficTo)
		}
		return trafficApplied(st, "Serving")
	})
	pods := readyPods(t, app)
	before := sc.StatsT(t)
	waitAnswered(t, sc, before, append(pods, "vm-1"))
	t.Logf("Serve: every pod answered within %s of the switch", time.Since(switched).Round(time.Second))

	// Back to Standby: the rollback.
	switched = time.Now()
	setTraffic(t, app, v1alpha1.TrafficStandby)
	waitView(t, app, "Standby again: the pods held OUT_OF_SERVICE", func(st v1alpha1.EurekaSyncerStatus) error {
		if st.UpInstances != 0 || st.OutOfServiceInstances != 2 || st.TrafficTo != v1alpha1.TrafficToElsewhere {
			return fmt.Errorf("UP %d, OUT_OF_SERVICE %d, calls to %q", st.UpInstances, st.OutOfServiceInstances, st.TrafficTo)
		}
		return trafficApplied(st, "StandingBy")
	})
	rollback := callsWithoutPods(t, sc, app, 2*time.Minute, false)
	t.Logf("Standby again: no call reached a pod from %s after the switch (client caches %d s)", time.Since(switched).Round(time.Second), clientCacheSeconds)

	total := sc.StatsT(t).Since(start)
	if total.Failed != 0 {
		t.Fatalf("%d of %d calls failed across the switches (last error: %s)", total.Failed, total.OK+total.Failed, total.LastError)
	}
	t.Logf("%d calls across Standby → Serve → Standby, 0 failed; answered by %v (rollback window %d calls)", total.OK, total.ByInstance, rollback.OK)
}

// setTraffic switches the app's syncer, as kubectl patch does.
func setTraffic(t *testing.T, app cluster.App, traffic v1alpha1.Traffic) {
	t.Helper()
	s := &v1alpha1.EurekaSyncer{}
	s.Namespace, s.Name = app.Namespace, app.Name
	patch := fmt.Sprintf(`{"spec":{"traffic":%q}}`, traffic)
	if err := c.Node.Client.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// callsWithoutPods waits until the client has made a run of calls (at
// least 150, a few seconds at its rate) of which no pod of app answered
// one, and returns that run. Strict, the run counts from the client's
// start and a pod answering fails the test; otherwise a pod answering
// (client caches not yet expired after a switch) starts the run again.
func callsWithoutPods(t *testing.T, sc *harness.SpringClient, app cluster.App, timeout time.Duration, strict bool) harness.SpringStats {
	t.Helper()
	const run = 150
	from := sc.StatsT(t)
	if strict {
		from = harness.SpringStats{}
	}
	var window harness.SpringStats
	harness.Eventually(t, timeout, fmt.Sprintf("a run of %d calls none of which reached a pod of %s", run, app.Name), func() error {
		now, err := sc.Stats(context.Background())
		if err != nil {
			return err
		}
		window = now.Since(from)
		var pods []string
		for who := range window.ByInstance {
			if strings.HasPrefix(who, app.Name+"-") {
				pods = append(pods, who)
			}
		}
		if len(pods) > 0 {
			slices.Sort(pods)
			if strict {
				t.Fatalf("pods %v answered %v while in Standby", pods, window.ByInstance)
			}
			from = now
			return fmt.Errorf("pods %v still answered (caches not expired yet)", pods)
		}
		if window.OK < run {
			return fmt.Errorf("%d calls so far without a pod", window.OK)
		}
		return nil
	})
	return window
}
