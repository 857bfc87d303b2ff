package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	managerapp "github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// deploy creates the app's namespace, syncer and Deployment at once, as
// kubectl apply of one file does: the webhook must inject pods created a
// moment after their namespace and syncer, before the manager's cache has
// them (it then asks the API server).
func deploy(t *testing.T, a cluster.App, shape func(*appsv1.Deployment)) {
	t.Helper()
	if err := c.Deploy(context.Background(), a, shape); err != nil {
		t.Fatal(err)
	}
}

// rolloutCalled rolls every pod of the app while sc calls it by name, waits
// until the new pods are the ones registered and each has answered, and
// returns the calls made since the rollout began, and when it began.
func rolloutCalled(t *testing.T, app cluster.App, sc *harness.SpringClient) (harness.SpringStats, time.Time) {
	t.Helper()
	before := sc.StatsT(t)
	began := time.Now()
	rollout(t, app)
	pods := waitRolledOut(t, app, 3*time.Minute)
	waitAnswered(t, sc, before, pods)
	return sc.StatsT(t).Since(before), began
}

func scale(t *testing.T, a cluster.App, replicas int32) {
	t.Helper()
	scaleDeployment(t, a.Namespace, a.Name, replicas)
}

// syncer reads the app's EurekaSyncer.
func syncer(t *testing.T, a cluster.App) *v1alpha1.EurekaSyncer {
	t.Helper()
	var s v1alpha1.EurekaSyncer
	if err := c.Node.Client.Get(context.Background(), client.ObjectKey{Namespace: a.Namespace, Name: a.Name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// waitEvent waits for an Event with reason on the app's syncer whose note
// contains each of words, and returns it.
func waitEvent(t *testing.T, a cluster.App, reason string, timeout time.Duration, words ...string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	harness.Eventually(t, timeout, fmt.Sprintf("a %s Event on syncer %s naming %v", reason, a.Name, words), func() error {
		var events eventsv1.EventList
		if err := c.Node.Client.List(context.Background(), &events, client.InNamespace(a.Namespace)); err != nil {
			return err
		}
		var seen []string
	next:
		for _, e := range events.Items {
			if e.Reason != reason || e.Regarding.Kind != "EurekaSyncer" || e.Regarding.Name != a.Name {
				continue
			}
			seen = append(seen, e.Note)
			for _, w := range words {
				if !strings.Contains(e.Note, w) {
					continue next
				}
			}
			found = e
			return nil
		}
		return fmt.Errorf("%d events, those of reason %s: %q", len(events.Items), reason, seen)
	})
	return found
}

// containerID is the ID the kubelet reports for the named container of a
// running pod, with its restart count.
func containerID(p *corev1.Pod, name string) (string, int32, error) {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name && s.State.Running != nil && s.ContainerID != "" {
			return s.ContainerID, s.RestartCount, nil
		}
	}
	return "", 0, fmt.Errorf("pod %s: container %s is not running", p.Name, name)
}

// managerLease reads the manager's leader election Lease.
func managerLease(ctx context.Context) (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: cluster.ManagerNamespace, Name: managerapp.LeaderElectionID}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// leader waits until a manager pod holds the Lease and returns the holder's
// identity and its pod: controller-runtime names the holder
// "<hostname>_<uuid>", and a pod's hostname is its name.
func leader(t *testing.T) (string, *corev1.Pod) {
	t.Helper()
	var holder string
	var pod corev1.Pod
	harness.Eventually(t, time.Minute, "a manager pod holds the Lease "+managerapp.LeaderElectionID, func() error {
		ctx := context.Background()
		l, err := managerLease(ctx)
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		holder = *l.Spec.HolderIdentity
		name, _, _ := strings.Cut(holder, "_")
		return c.Node.Client.Get(ctx, client.ObjectKey{Namespace: cluster.ManagerNamespace, Name: name}, &pod)
	})
	return holder, &pod
}

// lastSeen is when an Event last happened, whichever API wrote it: the
// events.k8s.io recorders set eventTime and series, the core/v1 ones
// (ReplicaSets) the deprecated timestamps.
func lastSeen(e eventsv1.Event) time.Time {
	last := e.EventTime.Time
	for _, t := range []time.Time{e.DeprecatedLastTimestamp.Time, e.DeprecatedFirstTimestamp.Time} {
		if t.After(last) {
			last = t
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(last) {
		last = e.Series.LastObservedTime.Time
	}
	return last
}
