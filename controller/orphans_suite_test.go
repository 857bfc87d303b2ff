package controller_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestOrphans_AnInstanceWhosePodIsGoneIsRemovedWithinOneResync(t *testing.T) {
	needsServers(t)
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
			harness.Eventually(t, patience, "both registered", func() error {
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
			harness.Eventually(t, patience, "orphan removed", func() error {
				_, err := c.Instance(context.Background(), orphan.App, orphan.InstanceID)
				if errors.Is(err, eureka.ErrNotFound) {
					return nil
				}
				return fmt.Errorf("still registered %s after deletion (%v)", time.Since(deleted), err)
			})
			if _, err := c.Instance(context.Background(), keepInst.App, keepInst.InstanceID); err != nil {
				t.Fatalf("the instance of a live pod was removed: %v", err)
			}
			harness.Eventually(t, patience, "orphan counted", func() error {
				got, err := getSyncer(s)
				if err != nil || got.Status.OrphansRemoved != 1 || got.Status.RegisteredInstances != 1 {
					return fmt.Errorf("status %+v, %v", got.Status, err)
				}
				return nil
			})
		})
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
	harness.Eventually(t, patience, "registered", func() error {
		got, err := getSyncer(s)
		if err != nil || got.Status.RegisteredInstances != 1 || got.Status.SelectedPods != 1 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
	// Taken out of the selector for debugging: its registrar still runs.
	before := relabelled.DeepCopy()
	relabelled.Labels["app"] = "search-debug"
	if err := k8s.Patch(ctx, relabelled, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	// A true orphan whose removal proves that a collection ran after the
	// relabelling.
	doomed := newPod(t, ns, "search", "search-2", true, "10.0.4.2")
	orphan := register(t, c, s, doomed)
	if err := k8s.Delete(ctx, doomed, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the true orphan removed", func() error {
		if _, err := c.Instance(ctx, orphan.App, orphan.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("orphan still there (%v)", err)
		}
		return nil
	})
	if _, err := c.Instance(ctx, kept.App, kept.InstanceID); err != nil {
		t.Fatalf("the instance of a running pod outside the selector was removed: %v", err)
	}
	harness.Eventually(t, patience, "0 selected, 1 registered", func() error {
		got, err := getSyncer(s)
		if err != nil || got.Status.SelectedPods != 0 || got.Status.RegisteredInstances != 1 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
}

func TestOrphans_TheInstanceOfAFinishedPodIsRemoved(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "receipts", server.URL())
	c := directClient(t, server.URL())
	foreign(t, c, s)
	running := newPod(t, ns, "receipts", "receipts-1", true, "10.0.8.1")
	kept := register(t, c, s, running)
	evicted := newPod(t, ns, "receipts", "receipts-2", true, "10.0.8.2")
	orphan := register(t, c, s, evicted)
	harness.Eventually(t, patience, "both registered", func() error {
		got, err := getSyncer(s)
		if err != nil || got.Status.RegisteredInstances != 2 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
	// Evicted: the kubelet stopped every container, its registrar could
	// not cancel, and the pod object stays.
	before := evicted.DeepCopy()
	evicted.Status.Phase, evicted.Status.Reason, evicted.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	if err := k8s.Status().Patch(ctx, evicted, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the finished pod's instance removed and counted", func() error {
		if _, err := c.Instance(ctx, orphan.App, orphan.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("still registered (%v)", err)
		}
		got, err := getSyncer(s)
		if err != nil || got.Status.OrphansRemoved != 1 || got.Status.RegisteredInstances != 1 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
	if _, err := c.Instance(ctx, kept.App, kept.InstanceID); err != nil {
		t.Fatalf("the instance of a running pod was removed: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(evicted), &corev1.Pod{}); err != nil {
		t.Fatalf("the evicted pod: %v (it stays; only its instance goes)", err)
	}
}
