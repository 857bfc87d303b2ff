package controller_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestStatus_CountsSelectedInjectedAndRegisteredPods(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "orders")
	c := directClient(t, server.URL())
	foreign(t, c, s)
	for i := 1; i <= 3; i++ {
		pod := newPod(t, ns, "orders", fmt.Sprintf("orders-%d", i), true, fmt.Sprintf("10.0.0.%d", i))
		register(t, c, s, pod)
	}
	harness.Eventually(t, 3*resync, "status 3 selected, 3 injected, 3 registered, Ready", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		st := got.Status
		if st.SelectedPods != 3 || st.InjectedPods != 3 || st.ReadyPods != 3 || st.RegisteredInstances != 3 || st.UpInstances != 3 {
			return fmt.Errorf("status %+v", st)
		}
		if !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) {
			return fmt.Errorf("not Ready: %+v", st.Conditions)
		}
		return nil
	})
	out, err := exec.Command("kubectl", "--kubeconfig", cp.Kubeconfig, "get", "esync", "-n", ns, "--no-headers").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get esync: %v\n%s", err, out)
	}
	if fields := strings.Fields(string(out)); len(fields) < 6 || fields[1] != "ORDERS" || fields[2] != "3" || fields[3] != "3" || fields[4] != "3" || fields[5] != "True" {
		t.Fatalf("kubectl get esync = %q, want NAME APP=ORDERS SELECTED=3 INJECTED=3 REGISTERED=3 READY=True AGE", out)
	}
}

func TestOrphans_AnInstanceWhosePodIsGoneIsRemovedWithinOneResync(t *testing.T) {
	for _, profile := range []string{harness.ProfileFast, harness.ProfileReal} {
		t.Run(profile, func(t *testing.T) {
			srv := server
			if profile == harness.ProfileReal {
				// Self-preservation on and default eviction. Only the
				// server's response caches are shortened: a list read that
				// races a registration can be cached for up to 180 s (30 s
				// read-only + a read-write entry loaded just before the
				// invalidation), which the reconciler tolerates (it acts on
				// the next resync) but a test should not wait for.
				srv = harness.EurekaT(t, harness.EurekaOptions{Profile: harness.ProfileReal, Args: []string{
					"--eureka.server.use-read-only-response-cache=false",
					"--eureka.server.response-cache-auto-expiration-in-seconds=1",
				}})
			}
			ns := newNamespace(t)
			s := newSyncer(t, ns, "payments", srv.URL())
			c := directClient(t, srv.URL())
			foreign(t, c, s)
			keep := newPod(t, ns, "payments", "payments-1", true, "10.0.1.1")
			keepInst := register(t, c, s, keep)
			doomed := newPod(t, ns, "payments", "payments-2", true, "10.0.1.2")
			orphan := register(t, c, s, doomed)
			harness.Eventually(t, 3*resync, "both registered", func() error {
				got, err := getSyncer(s)
				if err != nil || got.Status.RegisteredInstances != 2 {
					all, lerr := c.Instances(context.Background(), s.EffectiveAppName())
					return fmt.Errorf("status %+v, %v; the server lists %v (%v)", got.Status, err, all, lerr)
				}
				return nil
			})
			// The registrar was killed with SIGKILL: the pod goes, its
			// instance stays.
			if err := k8s.Delete(context.Background(), doomed, &clientGrace0); err != nil {
				t.Fatal(err)
			}
			deleted := time.Now()
			harness.Eventually(t, resync+2*time.Second, "orphan removed", func() error {
				_, err := c.Instance(context.Background(), orphan.App, orphan.InstanceID)
				if errors.Is(err, eureka.ErrNotFound) {
					return nil
				}
				return fmt.Errorf("still registered %s after deletion (%v)", time.Since(deleted), err)
			})
			if _, err := c.Instance(context.Background(), keepInst.App, keepInst.InstanceID); err != nil {
				t.Fatalf("the instance of a live pod was removed: %v", err)
			}
			harness.Eventually(t, 3*resync, "orphan counted", func() error {
				got, err := getSyncer(s)
				if err != nil || got.Status.OrphansRemoved != 1 || got.Status.RegisteredInstances != 1 {
					return fmt.Errorf("status %+v, %v", got.Status, err)
				}
				return nil
			})
		})
	}
}

func TestPodsInjected_FalseNamingASelectedPodWithoutTheRegistrar(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "billing")
	foreign(t, directClient(t, server.URL()), s)
	newPod(t, ns, "billing", "billing-injected", true, "10.0.2.1")
	newPod(t, ns, "billing", "billing-before-label", false, "10.0.2.2")
	harness.Eventually(t, 3*resync, "PodsInjected false naming the pod", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionPodsInjected)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "billing-before-label") || strings.Contains(c.Message, "billing-injected") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}

func TestEurekaDown_ReportedWithTheURLAndRecoveredOnItsOwn(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "shipping") // default URL: through the proxy
	foreign(t, directClient(t, server.URL()), s)
	condition := func(want metav1.ConditionStatus, mention string) func() error {
		return func() error {
			got, err := getSyncer(s)
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionEurekaReachable)
			if c == nil || c.Status != want || !strings.Contains(c.Message, mention) {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		}
	}
	harness.Eventually(t, 3*resync, "reachable", condition(metav1.ConditionTrue, ""))
	proxy.Block()
	defer proxy.Unblock()
	harness.Eventually(t, 3*resync+2*time.Second, "unreachable, naming the URL", condition(metav1.ConditionFalse, proxy.Addr()))
	proxy.Unblock()
	harness.Eventually(t, 3*resync+2*time.Second, "reachable again", condition(metav1.ConditionTrue, ""))
}

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
	harness.Eventually(t, 3*resync, "finalizer added", func() error {
		got, err := getSyncer(s)
		if err != nil || len(got.Finalizers) == 0 {
			return fmt.Errorf("finalizers %v, %v", got.Finalizers, err)
		}
		return nil
	})
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 3*resync, "the running pod's instance out of traffic, the orphan gone, the pod to restart named", func() error {
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
		if c := meta.FindStatusCondition(syncer.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != "Detaching" || !strings.Contains(c.Message, running.Name) {
			return fmt.Errorf("Ready condition %+v, want Detaching naming %s", c, running.Name)
		}
		return nil
	})
	// The pod stops: its registrar cancels as it terminates.
	if err := c.Cancel(ctx, inst.App, inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, running, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 3*resync, "syncer gone once nothing is left", func() error {
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there (%v)", err)
		}
		return nil
	})
	mine, err := c.InstancesWithMetadata(ctx, s.EffectiveAppName(), map[string]string{eureka.MetaCluster: clusterID})
	if err != nil || len(mine) != 0 {
		t.Fatalf("left behind: %v, %v", mine, err)
	}
	var events corev1.EventList
	if err := k8s.List(ctx, &events, &clientInNamespace{ns}); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
	}
	if !strings.Contains(strings.Join(reasons, ","), "Detaching") || !strings.Contains(strings.Join(reasons, ","), "Detached") {
		t.Fatalf("events %v, want Detaching and Detached", reasons)
	}
}

func TestOrphans_APodThatNoLongerMatchesIsNotAnOrphan(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "search", server.URL())
	c := directClient(t, server.URL())
	foreign(t, c, s)
	relabelled := newPod(t, ns, "search", "search-1", true, "10.0.4.1")
	kept := register(t, c, s, relabelled)
	harness.Eventually(t, 3*resync, "registered", func() error {
		got, err := getSyncer(s)
		if err != nil || got.Status.RegisteredInstances != 1 || got.Status.SelectedPods != 1 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
	// Taken out of the selector for debugging: its registrar still runs.
	relabelled.Labels["app"] = "search-debug"
	if err := k8s.Update(ctx, relabelled); err != nil {
		t.Fatal(err)
	}
	// A true orphan whose removal proves that a collection ran after the
	// relabelling.
	doomed := newPod(t, ns, "search", "search-2", true, "10.0.4.2")
	orphan := register(t, c, s, doomed)
	if err := k8s.Delete(ctx, doomed, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 3*resync, "the true orphan removed", func() error {
		if _, err := c.Instance(ctx, orphan.App, orphan.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("orphan still there (%v)", err)
		}
		return nil
	})
	if _, err := c.Instance(ctx, kept.App, kept.InstanceID); err != nil {
		t.Fatalf("the instance of a running pod outside the selector was removed: %v", err)
	}
	harness.Eventually(t, 3*resync, "0 selected, 1 registered", func() error {
		got, err := getSyncer(s)
		if err != nil || got.Status.SelectedPods != 0 || got.Status.RegisteredInstances != 1 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
}

func TestDelete_WhileEurekaIsDownTheSyncerStaysUntilItAnswers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "payments") // default URL: through the proxy
	c := directClient(t, server.URL())
	foreign(t, c, s) // checked untouched at the end
	// Only an instance is left of this syncer: its pod is gone, so nothing
	// in Kubernetes holds the syncer back; only Eureka says it must stay.
	gone := newPod(t, ns, "payments", "payments-1", true, "10.0.5.1")
	inst := register(t, c, s, gone)
	harness.Eventually(t, 3*resync, "finalizer added", func() error {
		got, err := getSyncer(s)
		if err != nil || len(got.Finalizers) == 0 {
			return fmt.Errorf("finalizers %v, %v", got.Finalizers, err)
		}
		return nil
	})
	proxy.Block()
	defer proxy.Unblock()
	if err := k8s.Delete(ctx, gone, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 3*resync+2*time.Second, "deletion blocked, saying why and how to abandon", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return fmt.Errorf("syncer: %w (it must stay while its instances cannot be removed)", err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionEurekaReachable)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "DetachBlocked" ||
			!strings.Contains(cond.Message, v1alpha1.Finalizer) || !strings.Contains(cond.Message, proxy.Addr()) {
			return fmt.Errorf("EurekaReachable %+v, want DetachBlocked naming the finalizer and the URL", cond)
		}
		return nil
	})
	if _, err := c.Instance(ctx, inst.App, inst.InstanceID); err != nil {
		t.Fatalf("the orphan while Eureka was unreachable: %v", err)
	}

	proxy.Unblock()
	harness.Eventually(t, 3*resync+2*time.Second, "once Eureka answers: the orphan cancelled, then the syncer gone", func() error {
		if _, err := c.Instance(ctx, inst.App, inst.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("orphan still there (%v)", err)
		}
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there (%v)", err)
		}
		return nil
	})
}
