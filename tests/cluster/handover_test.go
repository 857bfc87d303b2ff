package cluster_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// One service's whole migration, told as docs/operations.md tells it ("From
// VMs to the day Eureka retires"), with a caller that discovers through
// Kubernetes calling it by name throughout:
//
//  1. JOURNAL runs on a VM; an import with includeThisCluster gives it its
//     Kubernetes name, journal.handover.svc.
//  2. It moves to pods: Standby (registered OUT_OF_SERVICE, so listed in
//     the slices but not ready), then Serve (ready, sharing the calls with
//     the VM); the VM stops, its Spring client cancels it, and it leaves the
//     slices.
//  3. The name is handed to Kubernetes: the Service is taken from the
//     import (the import says ServiceNotOwned and writes nothing), made to
//     select the pods, and the import is deleted, which removes only its
//     own slices.
//  4. The syncer is deleted: the pods leave Eureka while they run on.
//
// The Service, and its ClusterIP, stay the same throughout, the pods keep
// answering, and no call fails.
func TestHandover_AServiceMovesFromVMsToPodsAndKeepsItsName(t *testing.T) {
	story(t, 200*time.Second)
	ctx := context.Background()
	const ns, name = "handover", "journal"
	app := cluster.App{Namespace: ns, Name: name, Replicas: 2, DrainSeconds: ptr.To[int32](drainSeconds), Traffic: v1alpha1.TrafficStandby}
	createNamespace(t, ns, nil)

	t.Log("1. the VM, and the import that gives it its Kubernetes name")
	vm := startImportedVM(t, name, "vm-1")
	watched := watchSlices(t, ns, name)
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.EurekaImportSpec{App: name, Eureka: v1alpha1.EurekaServers{ServiceURLs: c.Peers.URLs()}, IncludeThisCluster: true}}
	if err := c.Node.Client.Create(ctx, imp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(c.Node.Client.Delete(context.Background(), imp)) })
	watched.wait(t, 3*time.Minute, "vm-1's endpoint ready", ready(vm.port))
	var svc corev1.Service
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		t.Fatal(err)
	}
	uid, clusterIP := svc.UID, svc.Spec.ClusterIP
	caller := startCaller(t, ns, "http://"+name+"."+ns+".svc/")
	waitAnswered(t, caller, harness.SpringStats{}, []string{"vm-1"})
	start := caller.statsT(t)

	t.Log("2. the pods: Standby, then Serve; then the VM stops")
	deploy(t, app, nil)
	waitView(t, app, "the pods registered OUT_OF_SERVICE beside the VM", func(st v1alpha1.EurekaSyncerStatus) error {
		if st.RegisteredInstances != 2 || st.OutOfServiceInstances != 2 || st.ElsewhereUpInstances != 1 {
			return fmt.Errorf("registered %d, OUT_OF_SERVICE %d, UP elsewhere %d", st.RegisteredInstances, st.OutOfServiceInstances, st.ElsewhereUpInstances)
		}
		return nil
	})
	pods := podIPs(t, app)
	waitPodEndpoints(t, watched, "the pods listed in the import's slices, not ready", pods, false)
	setTraffic(t, app, v1alpha1.TrafficServe)
	waitPodEndpoints(t, watched, "the pods ready in the import's slices", pods, true)
	waitAnswered(t, caller, start, slices.Sorted(maps.Values(pods)))
	// A VM stopped at once would take calls until the next registry read
	// (a Spring app's web server stops before its Eureka client cancels):
	// it goes OUT_OF_SERVICE first, and stops once no call reaches it.
	if err := importEurekaClient(t).SetStatusOverride(ctx, name, vm.instanceID, eureka.StatusOutOfService); err != nil {
		t.Fatal(err)
	}
	watched.wait(t, 3*time.Minute, "vm-1's endpoint not ready", func(eps map[int32]bool) error {
		if eps[vm.port] {
			return fmt.Errorf("vm-1's endpoint (port %d) still ready", vm.port)
		}
		return nil
	})
	callsWithout(t, caller, "vm-1", 100)
	if err := vm.Stop(); err != nil {
		t.Fatal(err)
	}
	watched.wait(t, 3*time.Minute, "vm-1's endpoint gone once it cancelled", func(eps map[int32]bool) error {
		if _, listed := eps[vm.port]; listed {
			return fmt.Errorf("vm-1's endpoint (port %d) still listed", vm.port)
		}
		return nil
	})

	t.Log("3. the name handed to Kubernetes")
	patch := fmt.Sprintf(`[{"op":"remove","path":"/metadata/ownerReferences"},{"op":"remove","path":"/metadata/labels/%s"}]`,
		strings.NewReplacer("~", "~0", "/", "~1").Replace(controller.ImportLabel)) // a JSON Pointer (RFC 6901)
	if err := c.Node.Client.Patch(ctx, &svc, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	// Its Endpoints too (for Spring Cloud Kubernetes' callers), as the
	// docs say: else the garbage collector deletes it with the import.
	//lint:ignore SA1019 the import keeps one for Spring Cloud Kubernetes, and the hand-over keeps it
	eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Node.Client.Patch(ctx, eps, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/ownerReferences"}]`))); err != nil {
		t.Fatal(err)
	}
	epsUID := eps.UID
	waitImport(t, ns, name, "the import says ServiceNotOwned", func(st v1alpha1.EurekaImportStatus) error {
		if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionServiceOwned); cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("ServiceOwned is %+v", cond)
		}
		return nil
	})
	selector := fmt.Sprintf(`{"spec":{"selector":{"app":%q},"ports":[{"port":80,"targetPort":"http"}]}}`, name)
	if err := c.Node.Client.Patch(ctx, &svc, client.RawPatch(types.StrategicMergePatchType, []byte(selector))); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 3*time.Minute, "Kubernetes' own slices list both pods ready", func() error {
		ready, err := controllerSliceReady(ctx, ns, name)
		if err == nil && !maps.Equal(ready, readyMap(pods)) {
			err = fmt.Errorf("ready by address %v, want %v", ready, pods)
		}
		return err
	})
	if err := c.Node.Client.Delete(ctx, imp); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 3*time.Minute, "the import and its own slices gone", func() error {
		err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(imp), imp)
		if err == nil {
			return fmt.Errorf("the import is still there (finalizers %v)", imp.Finalizers)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		var own discoveryv1.EndpointSliceList
		if err := c.Node.Client.List(ctx, &own, client.InNamespace(ns), client.MatchingLabels{controller.ImportLabel: name}); err != nil {
			return err
		}
		if len(own.Items) > 0 {
			return fmt.Errorf("%d of the import's slices left", len(own.Items))
		}
		return nil
	})
	callsWithout(t, caller, "vm-1", 100)

	t.Log("4. detached: the pods leave Eureka and keep answering by name")
	if err := c.Node.Client.Delete(ctx, syncer(t, app)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 3*time.Minute, "Eureka lists no instance of JOURNAL", func() error {
		for _, peer := range c.Peers.Servers {
			instances, err := peer.SpringRead("JOURNAL")
			if err != nil {
				return err
			}
			if len(instances) > 0 {
				return fmt.Errorf("%s lists %d instance(s)", peer.URL(), len(instances))
			}
		}
		return nil
	})
	after := callsWithout(t, caller, "vm-1", 100)
	if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(eps), eps); err != nil {
		t.Errorf("the Endpoints handed over: %v", err)
	} else if eps.UID != epsUID {
		t.Errorf("the Endpoints was made anew (UID %s → %s): it went with the import", epsUID, eps.UID)
	}

	if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(&svc), &svc); err != nil {
		t.Fatal(err)
	}
	if svc.UID != uid || svc.Spec.ClusterIP != clusterIP {
		t.Errorf("the Service changed: UID %s → %s, ClusterIP %s → %s", uid, svc.UID, clusterIP, svc.Spec.ClusterIP)
	}
	total := caller.statsT(t).Since(start)
	t.Logf("%d calls by name to %s (ClusterIP %s) from the VM to the pods and through the handover, %d failed; answered by %v; the last %d by %v",
		total.OK+total.Failed, name, clusterIP, total.Failed, total.ByInstance, after.OK, after.ByInstance)
	if total.Failed != 0 {
		t.Errorf("%d of %d calls failed; last error: %s", total.Failed, total.OK+total.Failed, total.LastError)
	}
}

// podIPs are the app's pods by IP: pod name.
func podIPs(t *testing.T, app cluster.App) map[string]string {
	t.Helper()
	ips := map[string]string{}
	for _, p := range podsOf(t, app) {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			ips[p.Status.PodIP] = p.Name
		}
	}
	if len(ips) != int(app.Replicas) {
		t.Fatalf("pods by IP %v, want %d", ips, app.Replicas)
	}
	return ips
}

func readyMap(pods map[string]string) map[string]bool {
	out := map[string]bool{}
	for ip := range pods {
		out[ip] = true
	}
	return out
}

// waitPodEndpoints waits until the import's slices list each pod, ready as
// said.
func waitPodEndpoints(t *testing.T, w *sliceWatch, what string, pods map[string]string, wantReady bool) {
	t.Helper()
	harness.Eventually(t, 3*time.Minute, what, func() error {
		w.mu.Lock()
		got := map[string]bool{}
		for _, s := range w.slices {
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					got[a] = ptr.Deref(e.Conditions.Ready, false)
				}
			}
		}
		w.mu.Unlock()
		for ip := range pods {
			if isReady, listed := got[ip]; !listed || isReady != wantReady {
				return fmt.Errorf("pod %s (%s): listed %t, ready %t; endpoints %v", pods[ip], ip, listed, isReady, got)
			}
		}
		return nil
	})
}

// controllerSliceReady is what Kubernetes' endpoint slice controller lists
// for a Service: ready by address.
func controllerSliceReady(ctx context.Context, ns, service string) (map[string]bool, error) {
	var list discoveryv1.EndpointSliceList
	if err := c.Node.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{
		discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				out[a] = ptr.Deref(e.Conditions.Ready, false)
			}
		}
	}
	return out, nil
}
