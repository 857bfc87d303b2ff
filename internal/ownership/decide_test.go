package ownership

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

func policy(name string, apps []string, namespaces []string, selector map[string]string, elsewhere v1alpha1.ElsewhereRule) v1alpha1.EurekaAppPolicy {
	p := v1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.EurekaAppPolicySpec{Apps: apps, Namespaces: namespaces, Elsewhere: elsewhere}}
	if selector != nil {
		p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: selector}
	}
	return p
}

func TestDecide_WithoutAPolicyTheFirstClaimantOwnsTheApp(t *testing.T) {
	shop, other := Namespace{Name: "shop"}, Namespace{Name: "intruder"}
	v := Decide("orders", shop, nil, nil)
	if v.Allowed || !v.NeedsClaim || v.Reason != ReasonUnclaimed {
		t.Fatalf("unclaimed app: %+v, want a claim needed", v)
	}
	claim := NewClaim("orders", "shop")
	if v := Decide("Orders", shop, nil, claim); !v.Allowed || v.Reason != ReasonClaimed || v.Owner != "shop" {
		t.Errorf("the owner: %+v, want allowed by its claim", v)
	}
	v = Decide("ORDERS", other, nil, claim)
	if v.Allowed || v.Reason != ReasonOwnedElsewhere || v.Owner != "shop" {
		t.Fatalf("another namespace: %+v, want refused, owner shop", v)
	}
	for _, want := range []string{"ORDERS", "namespace shop", "EurekaAppClaim orders", "EurekaAppPolicy"} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("refusal %q does not name %q", v.Message, want)
		}
	}
}

func TestDecide_APolicyGovernsTheAppsItNamesAndOnlyThose(t *testing.T) {
	policies := []v1alpha1.EurekaAppPolicy{
		policy("payments-team", []string{"PAYMENTS", "payments-*"}, []string{"payments"}, map[string]string{"team": "payments"}, ""),
	}
	cases := []struct {
		app       string
		ns        Namespace
		allowed   bool
		reason    string
		needClaim bool
	}{
		{"payments", Namespace{Name: "payments"}, true, ReasonGranted, false},
		{"PAYMENTS-EU", Namespace{Name: "pay-2", Labels: map[string]string{"team": "payments"}}, true, ReasonGranted, false},
		{"PAYMENTS", Namespace{Name: "shop"}, false, ReasonNotGranted, false},
		// A claim cannot beat a policy.
		{"PAYMENTS-EU", Namespace{Name: "shop", Labels: map[string]string{"team": "shop"}}, false, ReasonNotGranted, false},
		{"ORDERS", Namespace{Name: "shop"}, false, ReasonUnclaimed, true},
	}
	for _, c := range cases {
		v := Decide(c.app, c.ns, policies, NewClaim(c.app, c.ns.Name))
		if c.needClaim {
			v = Decide(c.app, c.ns, policies, nil)
		}
		if v.Allowed != c.allowed || v.Reason != c.reason || v.NeedsClaim != c.needClaim {
			t.Errorf("%s in %s: %+v, want allowed %v reason %s", c.app, c.ns.Name, v, c.allowed, c.reason)
		}
		if c.reason == ReasonNotGranted && !strings.Contains(v.Message, "payments-team") {
			t.Errorf("refusal %q does not name the policy", v.Message)
		}
	}
}

func TestDecide_ElsewhereRefusedOnlyWhenEveryGrantingPolicyRefuses(t *testing.T) {
	ns := Namespace{Name: "shop"}
	refuse := policy("new-apps", []string{"*"}, []string{"shop"}, nil, v1alpha1.ElsewhereRefuse)
	v := Decide("ORDERS", ns, []v1alpha1.EurekaAppPolicy{refuse}, nil)
	if !v.Allowed || v.JoinElsewhere {
		t.Fatalf("%+v, want allowed, not joining elsewhere", v)
	}
	if r := v.RefuseElsewhere("2 instances"); r.Allowed || r.Reason != ReasonElsewhereRefused || !strings.Contains(r.Message, "new-apps") {
		t.Errorf("with instances elsewhere: %+v", r)
	}
	join := policy("orders", []string{"ORDERS"}, []string{"shop"}, nil, v1alpha1.ElsewhereJoin)
	v = Decide("ORDERS", ns, []v1alpha1.EurekaAppPolicy{refuse, join}, nil)
	if r := v.RefuseElsewhere("2 instances"); !r.Allowed || r.Policy != "orders" {
		t.Errorf("a second policy lets it join: %+v", r)
	}
	if r := Decide("ORDERS", ns, nil, NewClaim("ORDERS", "shop")).RefuseElsewhere("2"); !r.Allowed {
		t.Errorf("without a policy an app joins its VMs (a migration): %+v", r)
	}
}

// Every app name the CRD and the webhook admit has a valid claim name, and
// distinct apps have distinct claims.
func TestClaimName_IsAValidObjectNameOneToOneWithTheApp(t *testing.T) {
	const alphabet = "ABCXYZabcxyz0189._-"
	seen := map[string]string{}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := 1 + rnd.IntN(128)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		const edge = "ABCXYZabcxyz0189"
		b[0], b[n-1] = edge[rnd.IntN(len(edge))], edge[rnd.IntN(len(edge))]
		app := strings.ToUpper(string(b))
		name := ClaimName(app)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("ClaimName(%q) = %q: %v", app, name, errs)
		}
		if prev, ok := seen[name]; ok && prev != app {
			t.Fatalf("%q and %q share claim %q", prev, app, name)
		}
		seen[name] = app
		if ClaimName(strings.ToLower(app)) != name {
			t.Fatalf("ClaimName depends on case for %q", app)
		}
	}
	if got := ClaimName("ORDERS"); got != "orders" {
		t.Errorf("ClaimName(ORDERS) = %q, want the readable orders", got)
	}
}

// registering is a syncer's status as the reconciler writes it for one
// that registers its app: pods injected, instances in Eureka.
func registering(s v1alpha1.EurekaSyncer) v1alpha1.EurekaSyncer {
	s.Status.InjectedPods, s.Status.RegisteredInstances = 1, 1
	return s
}

func TestFirstRegistrant_IsTheOldestLiveSyncersNamespace(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.Unix(1_700_000_000+sec, 0) }
	syncer := func(ns, name, app string, created metav1.Time, deleting bool) v1alpha1.EurekaSyncer {
		s := v1alpha1.EurekaSyncer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: created},
			Spec: v1alpha1.EurekaSyncerSpec{AppName: app}}
		if deleting {
			s.DeletionTimestamp = &created
		}
		return registering(s)
	}
	all := []v1alpha1.EurekaSyncer{
		syncer("late", "orders", "orders", at(30), false),
		syncer("gone", "orders", "ORDERS", at(1), true),
		syncer("first", "o", "Orders", at(10), false),
		syncer("tie-b", "orders", "orders", at(10), false),
		syncer("other", "cart", "cart", at(0), false),
	}
	if got := FirstRegistrant(all, "orders", "asker"); got != "first" {
		t.Errorf("FirstRegistrant = %q, want first (oldest live; ties by namespace/name)", got)
	}
	if got := FirstRegistrant(all, "PAYMENTS", "asker"); got != "asker" {
		t.Errorf("no syncer registers the app: %q, want the asker", got)
	}
}

// The squat: a syncer that only names an app (a selector matching
// nothing), or that was refused, earns nothing however old it is; the
// namespace that registers the app is its first registrant, and with
// none, the namespace asking (whose pod is being admitted).
func TestFirstRegistrant_ASyncerThatOnlyNamesTheAppOrWasRefusedEarnsNothing(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	refused := metav1.Condition{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionFalse, Reason: ReasonOwnedElsewhere}
	permitted := metav1.Condition{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionTrue, Reason: ReasonClaimed}
	for range 2000 {
		var all []v1alpha1.EurekaSyncer
		var oldestEarning *v1alpha1.EurekaSyncer
		for i := range 1 + rnd.IntN(6) {
			s := v1alpha1.EurekaSyncer{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i), Name: "s",
				CreationTimestamp: metav1.Unix(int64(rnd.IntN(1000)), 0)}, Spec: v1alpha1.EurekaSyncerSpec{AppName: "PROBE"}}
			s.Status.InjectedPods, s.Status.RegisteredInstances = int32(rnd.IntN(2)), int32(rnd.IntN(2))
			switch rnd.IntN(3) {
			case 0:
				s.Status.Conditions = []metav1.Condition{refused}
			case 1:
				s.Status.Conditions = []metav1.Condition{permitted}
			}
			all = append(all, s)
		}
		for i := range all {
			s := &all[i]
			if !Registers(s) {
				continue
			}
			if oldestEarning == nil || s.CreationTimestamp.Before(&oldestEarning.CreationTimestamp) ||
				s.CreationTimestamp.Equal(&oldestEarning.CreationTimestamp) && s.Namespace < oldestEarning.Namespace {
				oldestEarning = s
			}
		}
		want := "asker"
		if oldestEarning != nil {
			want = oldestEarning.Namespace
		}
		got := FirstRegistrant(all, "probe", "asker")
		if got != want {
			t.Fatalf("FirstRegistrant = %q, want %q among %+v", got, want, all)
		}
		for i := range all {
			s := &all[i]
			if got == s.Namespace && (s.Status.InjectedPods == 0 && s.Status.RegisteredInstances == 0 || meta.IsStatusConditionFalse(s.Status.Conditions, v1alpha1.ConditionPermitted)) {
				t.Fatalf("%s earned app PROBE without registering it, or refused: %+v", s.Namespace, s.Status)
			}
		}
	}
}

// A held claim is still its namespace's: the owner may register the app
// again, every other namespace is refused with the owner and the hold's
// end named.
func TestDecide_AHeldClaimStaysWithItsNamespace(t *testing.T) {
	claim := NewClaim("PROBE", "probe")
	claim.Annotations = map[string]string{v1alpha1.ClaimHeldUntilAnnotation: "2026-11-29T08:00:00Z"}
	if v := Decide("probe", Namespace{Name: "probe"}, nil, claim); !v.Allowed || v.Reason != ReasonClaimed || !strings.Contains(v.Message, "held for it until 2026-11-29T08:00:00Z") {
		t.Errorf("the owner: %+v, want allowed, the hold named", v)
	}
	v := Decide("PROBE", Namespace{Name: "evil"}, nil, claim)
	if v.Allowed || v.Reason != ReasonOwnedElsewhere || v.Owner != "probe" {
		t.Fatalf("another namespace: %+v, want refused, owner probe", v)
	}
	for _, want := range []string{"namespace probe", "held for it until 2026-11-29T08:00:00Z", "EurekaAppPolicy"} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("refusal %q does not name %q", v.Message, want)
		}
	}
}
