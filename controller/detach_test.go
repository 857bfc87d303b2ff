package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestDelete_DetachesAndLeavesNothingThisClusterCreated(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "inventory")
	c := directClient(t, server.URL())
	foreign(t, c, s)
	running := newPod(t, ns, "inventory", "inventory-1", true, "10.0.3.1")
	inst := register(t, c, s, running)
	gone := newPod(t, ns, "inventory", "inventory-2", true, "10.0.3.2")
	orphan := register(t, c, s, gone)
	if err := k8s.Delete(ctx, gone, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	waitFinalizer(t, s)
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the running pod's instance out of traffic and the pod told Detached, the orphan gone", func() error {
		got, err := c.Instance(ctx, inst.App, inst.InstanceID)
		if err != nil || got.Status != eureka.StatusDown {
			return fmt.Errorf("running pod's instance: %+v, %v", got.Status, err)
		}
		if _, err := c.Instance(ctx, orphan.App, orphan.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("orphan still there (%v)", err)
		}
		syncer, err := getSyncer(s)
		if apierrors.IsNotFound(err) {
			return errors.New("finalizer released while an instance was left")
		}
		if c := meta.FindStatusCondition(syncer.Status.Conditions, v1alpha1.ConditionSynced); c == nil || c.Reason != "Detaching" || !strings.Contains(c.Message, "DOWN") {
			return fmt.Errorf("Synced condition %+v, want Detaching saying the instance stays DOWN", c)
		}
		var pod corev1.Pod
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(running), &pod); err != nil {
			return err
		}
		if got := pod.Annotations[v1alpha1.TrafficAnnotation]; got != v1alpha1.TrafficDetached {
			return fmt.Errorf("pod %s: %s=%q, want %s (what its registrar reads to leave)", pod.Name, v1alpha1.TrafficAnnotation, got, v1alpha1.TrafficDetached)
		}
		return nil
	})
	// Its registrar reads Detached and cancels; the pod runs on, and the
	// syncer goes: nothing this cluster created is left in Eureka.
	if err := c.Cancel(ctx, inst.App, inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "syncer gone once nothing is left, the pod still running", func() error {
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there (%v)", err)
		}
		return nil
	})
	mine, err := c.InstancesWithMetadata(ctx, s.EffectiveAppName(), map[string]string{eureka.MetaCluster: clusterID})
	if err != nil || len(mine) != 0 {
		t.Fatalf("left behind: %v, %v", mine, err)
	}
	// Events are written by the recorder's own goroutine, after the
	// write that let the syncer go: seen at 3.5 s under -race and load.
	harness.Eventually(t, patience, "the Detaching and Detached Events", func() error {
		var events corev1.EventList
		if err := k8s.List(ctx, &events, &clientInNamespace{ns}); err != nil {
			return err
		}
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason)
		}
		if !slices.Contains(reasons, "Detaching") || !slices.Contains(reasons, "Detached") {
			return fmt.Errorf("events %v, want Detaching and Detached", reasons)
		}
		return nil
	})
}

func TestDelete_WhileEurekaIsDownAndAPodRunsTheRegistrarTheSyncerStaysUntilItAnswers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "payments") // default URL: through the proxy
	c := directClient(t, server.URL())
	foreign(t, c, s) // checked untouched at the end
	// An instance whose pod is gone, and a pod that still runs the
	// registrar (and could register again while Eureka is away): the
	// finalizer waits for Eureka as long as it takes.
	gone := newPod(t, ns, "payments", "payments-1", true, "10.0.5.1")
	inst := register(t, c, s, gone)
	running := newPod(t, ns, "payments", "payments-2", true, "10.0.5.2")
	waitFinalizer(t, s)
	proxy.Block()
	defer proxy.Unblock()
	if err := k8s.Delete(ctx, gone, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "deletion blocked, saying why and how to abandon, with no time limit while the pod runs", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return fmt.Errorf("syncer: %w (it must stay while its instances cannot be removed)", err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionEurekaReachable)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "DetachBlocked" ||
			!strings.Contains(cond.Message, v1alpha1.Finalizer) || !strings.Contains(cond.Message, proxy.Addr()) {
			return fmt.Errorf("EurekaReachable %+v, want DetachBlocked naming the finalizer and the URL", cond)
		}
		synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced)
		if synced == nil || synced.Reason != "Detaching" {
			return fmt.Errorf("Synced %+v, want Detaching", synced)
		}
		if strings.Contains(synced.Message, "waits for Eureka until") {
			t.Fatalf("Synced %q: a deadline while a pod runs the registrar", synced.Message)
		}
		var pod corev1.Pod
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(running), &pod); err != nil {
			return err
		}
		if pod.Annotations[v1alpha1.TrafficAnnotation] != v1alpha1.TrafficDetached {
			return fmt.Errorf("pod annotations %v, want it told %s (then only Eureka holds the syncer)", pod.Annotations, v1alpha1.TrafficDetached)
		}
		return nil
	})
	if _, err := c.Instance(ctx, inst.App, inst.InstanceID); err != nil {
		t.Fatalf("the orphan while Eureka was unreachable: %v", err)
	}

	proxy.Unblock()
	harness.Eventually(t, patience, "once Eureka answers: the orphan cancelled, then the syncer gone", func() error {
		if _, err := c.Instance(ctx, inst.App, inst.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("orphan still there (%v)", err)
		}
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there (%v)", err)
		}
		return nil
	})
}

func TestDelete_AnUnreachableEurekaHoldsTheFinalizerOnlySoLongOnceNoPodRunsTheRegistrar(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	nowhere := fmt.Sprintf("http://127.0.0.1:%d/eureka", port) // a typo, a retired server: nobody listens
	s := newSyncer(t, ns, "ledger", nowhere)
	pod := newPod(t, ns, "ledger", "ledger-1", true, "10.0.6.1")
	waitFinalizer(t, s)
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "detach blocked while the pod runs the registrar, with no time limit", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return fmt.Errorf("syncer: %w (it must stay while a pod runs its registrar)", err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionEurekaReachable)
		if cond == nil || cond.Reason != "DetachBlocked" || !strings.Contains(cond.Message, nowhere) {
			return fmt.Errorf("EurekaReachable %+v, want DetachBlocked naming %s", cond, nowhere)
		}
		if synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced); synced != nil && strings.Contains(synced.Message, "waits for Eureka until") {
			t.Fatalf("Synced %q: a deadline while a pod runs the registrar", synced.Message)
		}
		var p corev1.Pod
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			return err
		}
		if p.Annotations[v1alpha1.TrafficAnnotation] != v1alpha1.TrafficDetached {
			return fmt.Errorf("pod annotations %v, want it told %s", p.Annotations, v1alpha1.TrafficDetached)
		}
		return nil
	})

	// The namespace is being deleted, say: the pod goes, nothing can
	// heartbeat any more, and the finalizer waits for Eureka no longer
	// than the bound.
	podGone := time.Now()
	if err := k8s.Delete(ctx, pod, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "Synced announcing when the finalizer goes", func() error {
		got, err := getSyncer(s)
		if apierrors.IsNotFound(err) {
			return nil // gone already: checked below
		}
		if err != nil {
			return err
		}
		if synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced); synced == nil || !strings.Contains(synced.Message, "waits for Eureka until") {
			return fmt.Errorf("Synced %+v, want the deadline", synced)
		}
		return nil
	})
	harness.Eventually(t, detachTimeout+patience, "the syncer gone within the bound", func() error {
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there %s after its last pod went (%v)", time.Since(podGone).Round(time.Second), err)
		}
		return nil
	})
	if waited := time.Since(podGone); waited < detachTimeout {
		t.Errorf("the finalizer went %s after the last pod, before the %s bound", waited, detachTimeout)
	}
	// The recorder writes Events in the background: wait for the warning.
	var warning corev1.Event
	harness.Eventually(t, patience, "a DetachTimedOut event", func() error {
		events, err := syncerEvents(ns, s.Name)
		if err != nil {
			return err
		}
		for _, e := range events {
			if e.Reason == "DetachTimedOut" {
				warning = e
				return nil
			}
		}
		return fmt.Errorf("no DetachTimedOut event among %d", len(events))
	})
	for _, want := range []string{nowhere, "lease", "self-preservation"} {
		if warning.Type != corev1.EventTypeWarning || !strings.Contains(warning.Message, want) {
			t.Errorf("event %s %s %q, want a Warning naming %q", warning.Type, warning.Reason, warning.Message, want)
		}
	}
	events, err := syncerEvents(ns, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Reason == "Detached" {
			t.Errorf("event %s %q: nothing confirmed that Eureka holds nothing", e.Reason, e.Message)
		}
	}
}
