package cluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// A pod whose registrar can no longer cancel its instance — its node died,
// so an operator (or the pod garbage collector) force-deletes the pod —
// leaves the instance in Eureka for its whole 90 s lease unless the
// reconciler removes it: it does, once the pod is gone, well within 30 s.
//
// On one node the node cannot die, so the registrar is frozen with SIGSTOP
// instead, and only then is the pod force-deleted: the kubelet's SIGTERM
// stays pending in the stopped process and its SIGKILL ends it without the
// registrar running again. A SIGKILL in place of the freeze would not do:
// the kubelet restarts a killed registrar (restartPolicy Always), and the
// new one registers the same instance ID and cancels it on the SIGTERM of
// the deletion, which would remove the instance for the reconciler. The
// test checks that the frozen process is the pod's only registrar (no
// restart) and that the OrphansRemoved Event names the instance: had
// anything cancelled it, the reconciler would have found nothing to
// remove. (Whether the process is seen stopped until it dies is not: the
// runtime may thaw it to deliver its SIGKILL, which a quiet run at efc310a
// saw as state R.)
func TestOrphan_RegistrarKilledIsCollected(t *testing.T) {
	story(t, 20*time.Second)
	ctx := context.Background()
	app := cluster.App{Namespace: "stock", Name: "inventory", Replicas: 2, DrainSeconds: ptr.To[int32](2)}
	deploy(t, app, nil)
	v := settle(t, app, 3*time.Minute)
	var victim corev1.Pod
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: v.ReadyPods[0]}, &victim); err != nil {
		t.Fatal(err)
	}
	registrar, restarts, err := containerID(&victim, v1alpha1.RegistrarContainerName)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := c.Node.ContainerPID(ctx, registrar)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node.Signal(ctx, registrar, "SIGSTOP"); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("the registrar of %s (pid %d) stopped", victim.Name, pid), func() error {
		if s := processState(pid); s != "T" {
			return fmt.Errorf("state %q", s)
		}
		return nil
	})
	var now corev1.Pod
	if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(&victim), &now); err != nil {
		t.Fatal(err)
	}
	if id, r, err := containerID(&now, v1alpha1.RegistrarContainerName); err != nil || id != registrar || r != restarts {
		t.Fatalf("the pod's registrar is not the frozen one: container %s restarted %d times (frozen: %s, %d), %v", id, r, registrar, restarts, err)
	}
	if inst, err := instanceOf(app, victim.UID); err != nil || inst == nil || inst.Status != "UP" {
		t.Fatalf("Eureka should list the instance of %s UP before its pod goes: %+v, %v", victim.Name, inst, err)
	}

	// The node is gone: the pod is force-deleted.
	if err := c.Node.Client.Delete(ctx, &victim, client.GracePeriodSeconds(0), client.Preconditions{UID: &victim.UID}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var died time.Duration
	thawed := ""
	// The lease lasts 90 s; before that only the reconciler can remove it,
	// within one resync (30 s) of the pod's end: it sees Eureka through one
	// registry read per resync.
	harness.Eventually(t, 75*time.Second, "the orphan of "+victim.Name+" removed from Eureka", func() error {
		// Once it is gone its pid is not looked at again (it may be reused).
		if died == 0 {
			switch s := processState(pid); s {
			case "T":
			case "", "Z":
				died = time.Since(deleted)
			default:
				// The runtime may thaw the process to deliver its
				// SIGKILL: seen running, it is being killed. Had it run
				// its SIGTERM handler and cancelled, the reconciler would
				// find nothing to remove: the OrphansRemoved Event below
				// names the instance only if the reconciler removed it.
				thawed = s
			}
		}
		inst, err := instanceOf(app, victim.UID)
		if err == nil && inst != nil {
			err = fmt.Errorf("Eureka still lists %s %s", inst.InstanceID, inst.Status)
		}
		return err
	})
	registrarNow := "still frozen"
	if died > 0 {
		registrarNow = fmt.Sprintf("killed by the kubelet %s after the deletion", died.Round(time.Millisecond))
	}
	if thawed != "" {
		registrarNow += fmt.Sprintf(" (seen in state %s while the runtime killed it)", thawed)
	}
	t.Logf("orphan of %s removed %s after its pod was force-deleted; its registrar was %s",
		victim.Name, time.Since(deleted).Round(time.Millisecond), registrarNow)
	settle(t, app, 2*time.Minute)

	if s := syncer(t, app); s.Status.OrphansRemoved < 1 {
		t.Errorf("status.orphansRemoved = %d, want at least 1", s.Status.OrphansRemoved)
	}
	e := waitEvent(t, app, "OrphansRemoved", 30*time.Second, victim.Name)
	t.Logf("event %s %s: %s", e.Type, e.Reason, e.Note)
}

// instanceOf is the app's instance in Eureka of the pod uid, or nil.
func instanceOf(app cluster.App, uid types.UID) (*harness.SpringInstance, error) {
	instances, err := c.Eureka.SpringRead(strings.ToUpper(app.Name))
	if err != nil {
		return nil, err
	}
	for _, in := range instances {
		if in.Metadata[eureka.MetaPodUID] == string(uid) {
			return &in, nil
		}
	}
	return nil, nil
}

// processState is the state letter of a host process (R, S, T, Z, …), or
// "" once it no longer exists.
func processState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// "pid (comm) state …": comm may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	if f := strings.Fields(s[i+1:]); len(f) > 0 {
		return f[0]
	}
	return ""
}
