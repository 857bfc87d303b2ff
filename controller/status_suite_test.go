package controller_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/internal/ownership"
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
	harness.Eventually(t, patience, "status 3 selected, 3 injected, 3 registered, READY 3/3, Synced", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		st := got.Status
		if st.SelectedPods != 3 || st.InjectedPods != 3 || st.ReadyPods != 3 || st.RegisteredInstances != 3 || st.UpInstances != 3 || st.Ready != "3/3" {
			return fmt.Errorf("status %+v", st)
		}
		for _, typ := range []string{v1alpha1.ConditionSynced, v1alpha1.ConditionExclusive, v1alpha1.ConditionDrained, v1alpha1.ConditionPodsInjected} {
			if !meta.IsStatusConditionTrue(st.Conditions, typ) {
				return fmt.Errorf("not %s: %+v", typ, st.Conditions)
			}
		}
		return nil
	})
	// The VM and the other cluster's instance are elsewhere, both UP.
	if got, want := getEsync(t, ns, s.Name), "orders ORDERS Serve 3/3 2/2 Both 3 True True"; !strings.HasPrefix(got, want+" ") {
		t.Fatalf("kubectl get esync = %q, want NAME APP TRAFFIC READY ELSEWHERE CALLS-TO REGISTERED PERMITTED SYNCED AGE = %q AGE", got, want)
	}
}

func TestSynced_FalseWhilePodsAreSelectedAndNoInstanceIsUp(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "cart")
	foreign(t, directClient(t, server.URL()), s) // UP, but not this cluster's
	for i := 1; i <= 2; i++ {
		podShape{ns: ns, app: "cart", name: fmt.Sprintf("cart-%d", i), ip: fmt.Sprintf("10.0.6.%d", i), registrar: true, ready: false,
			annotations: map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusInjected, v1alpha1.SyncerAnnotation: "cart", v1alpha1.DrainAnnotation: "100"}}.create(t)
	}
	// The foreign instances (a VM's, another cluster's) count elsewhere
	// once a registry read after their registration reached the syncer: a
	// resync at most.
	harness.Eventually(t, patience, "READY 0/2, ELSEWHERE 2/2, Synced False NoInstanceUp", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		st := got.Status
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced)
		if st.Ready != "0/2" || st.Elsewhere != "2/2" || c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NoInstanceUp" || !strings.Contains(c.Message, "2 pod(s) selected, 0 ready") {
			return fmt.Errorf("ready %q, elsewhere %q, Synced %+v", st.Ready, st.Elsewhere, c)
		}
		return nil
	})
	if got, want := getEsync(t, ns, s.Name), "cart CART Serve 0/2 2/2 Elsewhere 0 True False"; !strings.HasPrefix(got, want+" ") {
		t.Fatalf("kubectl get esync = %q, want %q AGE", got, want)
	}
	if got := getEsync(t, ns, s.Name, "-o", "wide"); !strings.Contains(got, " NoInstanceUp 2 0 0 0") {
		t.Fatalf("kubectl get esync -o wide = %q, want ... REASON=NoInstanceUp INJECTED=2 SKIPPED=0 OTHER-SYNCER=0 NO-DRAIN=0", got)
	}
}

func TestOverlap_TheNewerSyncerNamesTheOlderThatOwnsThePods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	older := newSyncer(t, ns, "ledger")
	newer := builders.Syncer(ns, "ledger-v2", builders.Selecting("ledger"), builders.Port(older.Spec.Port)) // the same pods
	if err := k8s.Create(ctx, newer); err != nil {
		t.Fatal(err)
	}
	c := directClient(t, server.URL())
	foreign(t, c, older)
	for i := 1; i <= 2; i++ { // the webhook gave them to the older syncer
		register(t, c, older, newPod(t, ns, "ledger", fmt.Sprintf("ledger-%d", i), true, fmt.Sprintf("10.0.7.%d", i)))
	}
	harness.Eventually(t, patience, "the newer syncer counts none and names the owner; the older counts both", func() error {
		gotNewer, err := getSyncer(newer)
		if err != nil {
			return err
		}
		st := gotNewer.Status
		if st.SelectedPods != 0 || st.InjectedPods != 0 || st.ReadyPods != 0 || st.PodsOwnedByOtherSyncers != 2 || st.Ready != "0/0" {
			return fmt.Errorf("newer status %+v", st)
		}
		x := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionExclusive)
		if x == nil || x.Status != metav1.ConditionFalse || x.Reason != "OverlappingSyncers" {
			return fmt.Errorf("newer Exclusive %+v", x)
		}
		for _, m := range []string{"syncer ledger owns 2 (ledger-1, ledger-2)", "oldest", "narrow the selector"} {
			if !strings.Contains(x.Message, m) {
				return fmt.Errorf("newer Exclusive message %q does not say %q", x.Message, m)
			}
		}
		gotOlder, err := getSyncer(older)
		if err != nil {
			return err
		}
		st = gotOlder.Status
		if st.SelectedPods != 2 || st.InjectedPods != 2 || st.PodsOwnedByOtherSyncers != 0 || st.Ready != "2/2" ||
			!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionExclusive) || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced) {
			return fmt.Errorf("older status %+v", st)
		}
		return nil
	})
	if got, want := getEsync(t, ns, newer.Name), "ledger-v2 LEDGER-V2 Serve 0/0 0/0 Nowhere 0 True True"; !strings.HasPrefix(got, want+" ") {
		t.Fatalf("kubectl get esync %s = %q, want %q AGE", newer.Name, got, want)
	}
	if got := getEsync(t, ns, newer.Name, "-o", "wide"); !strings.HasSuffix(got, " 0 0 2 0 0") {
		t.Fatalf("kubectl get esync -o wide = %q, want ... INJECTED=0 SKIPPED=0 OTHER-SYNCER=2 NO-DRAIN=0 OUTDATED=0", got)
	}
}

func TestPodsInjected_FalseNamingASelectedPodWithoutTheRegistrar(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "billing")
	foreign(t, directClient(t, server.URL()), s)
	newPod(t, ns, "billing", "billing-injected", true, "10.0.2.1")
	newPod(t, ns, "billing", "billing-before-label", false, "10.0.2.2")
	harness.Eventually(t, patience, "PodsInjected false naming the pod", func() error {
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
	harness.Eventually(t, patience, "reachable", condition(metav1.ConditionTrue, ""))
	proxy.Block()
	defer proxy.Unblock()
	harness.Eventually(t, patience, "unreachable, naming the URL", condition(metav1.ConditionFalse, proxy.Addr()))
	proxy.Unblock()
	harness.Eventually(t, patience, "reachable again", condition(metav1.ConditionTrue, ""))
}

// A syncer and an import the platform refuses are never Synced, even with
// nothing to sync (a selector matching nothing, an app Eureka does not
// list): Synced is False with the refusal's reason, and kubectl get
// esync,eimp, the API server's tables of the CRDs' printer columns, show
// PERMITTED False. A tenant with edit rights in its namespace names an app
// the platform granted to another namespace.
func TestStatus_ARefusedSyncerOrImportReadsPermittedFalseAndIsNeverSynced(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t) // skips without the servers
	harness.SuspendSharedApps(ctx, t, k8s)
	app := "TAKEN-" + strings.ToUpper(ns[len(ns)-5:])
	policy := &v1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(app)},
		Spec: v1alpha1.EurekaAppPolicySpec{Apps: []string{app}, Namespaces: []string{"owner-team"}}}
	if err := k8s.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), policy) })

	s := builders.Syncer(ns, "taken", builders.AppName(app), builders.Port(intstr.FromInt32(8080)), builders.Selecting("nothing-has-this-label"))
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the syncer Permitted False and Synced False, both naming the refusal", func() error {
		permitted, got, err := condition(s, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced)
		if permitted.Status != metav1.ConditionFalse || permitted.Reason != ownership.ReasonNotGranted || !strings.Contains(permitted.Message, policy.Name) {
			return fmt.Errorf("Permitted %+v", permitted)
		}
		if synced == nil || synced.Status != metav1.ConditionFalse || synced.Reason != ownership.ReasonNotGranted || !strings.Contains(synced.Message, "see the Permitted condition") {
			return fmt.Errorf("Synced %+v", synced)
		}
		return nil
	})
	if got := getEsync(t, ns, s.Name, "-o", "wide"); !strings.Contains(got, " 0 False False ") || !strings.Contains(got, " "+ownership.ReasonNotGranted+" ") {
		t.Errorf("kubectl get esync -o wide = %q, want ... REGISTERED=0 PERMITTED=False SYNCED=False AGE REASON=%s ...", got, ownership.ReasonNotGranted)
	}

	imp := newImport(t, ns, app, nil)
	harness.Eventually(t, patience, "the import Permitted False and Synced False, and kubectl get eimp says so", func() error {
		permitted, got, err := importCondition(imp, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced)
		if permitted == nil || permitted.Status != metav1.ConditionFalse || synced == nil || synced.Status != metav1.ConditionFalse || synced.Reason != permitted.Reason {
			return fmt.Errorf("Permitted %+v, Synced %+v", permitted, synced)
		}
		out, err := exec.Command("kubectl", "--kubeconfig", cp.Kubeconfig, "get", "eimp", imp.Name, "-n", ns, "--no-headers").CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl get eimp: %v: %s", err, out)
		}
		if row := strings.Join(strings.Fields(string(out)), " "); !strings.Contains(row, " False False "+permitted.Reason+" ") {
			return fmt.Errorf("kubectl get eimp = %q, want ... PERMITTED=False SYNCED=False REASON=%s AGE", row, permitted.Reason)
		}
		return nil
	})
}
