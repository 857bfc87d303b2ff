package controller

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// The pattern import's pure parts: which apps match, what each app's
// import is, and what the parent does to the imports of its namespace.

func patternParent(pattern string) *v1alpha1.EurekaImport {
	return &v1alpha1.EurekaImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop", UID: "parent-uid"},
		Spec: v1alpha1.EurekaImportSpec{App: pattern,
			Eureka: v1alpha1.EurekaServers{ServiceURLs: []string{"http://eureka:8761/eureka"}},
			Service: v1alpha1.ImportService{Type: v1alpha1.ImportHeadless,
				Ports: []v1alpha1.ImportPort{{Name: "https", Port: 443, InstancePort: v1alpha1.InstancePortSecure}}}},
	}
}

// registryOf lists, per app, instances elsewhere ("vm") or this cluster's
// ("pod").
func registryOf(apps map[string][]string) ([]string, func(string) []eureka.Instance) {
	var names []string
	for app := range apps {
		names = append(names, app)
	}
	return names, func(app string) []eureka.Instance {
		var out []eureka.Instance
		for i, kind := range apps[strings.ToUpper(app)] {
			inst := eureka.Instance{App: app, InstanceID: fmt.Sprintf("%s-%d", kind, i), Metadata: map[string]string{}}
			if kind == "pod" {
				inst.Metadata[eureka.MetaManagedBy] = eureka.ManagedByValue
				inst.Metadata[eureka.MetaCluster] = planTestCluster
			}
			out = append(out, inst)
		}
		return out
	}
}

func TestMatchPattern_MatchesAsThePolicyDoesAndNamesEachImportAfterItsApp(t *testing.T) {
	apps, instancesOf := registryOf(map[string][]string{
		"PAYMENTS-EU": {"vm"}, "PAYMENTS-US": {"vm", "pod"}, "PAYMENTS": {"vm"}, "BILLING-PAYMENTS-X": {"vm"},
		"PAYMENTS-K8S": {"pod"}, "PAYMENTS-A.B": {"vm"}, "PAYMENTS_OLD": {"vm"}, "PAYMENTS-" + strings.Repeat("X", 60): {"vm"},
	})
	for _, c := range []struct {
		pattern, apps, children, invalid string
		includeThisCluster               bool
	}{
		{pattern: "payments-*", apps: "[PAYMENTS-A.B PAYMENTS-EU PAYMENTS-US PAYMENTS-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX]",
			children: "[payments-eu payments-us]", invalid: "[PAYMENTS-A.B PAYMENTS-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX]"},
		// This cluster's own app is taken only when asked for.
		{pattern: "PAYMENTS-K*", apps: "[]", children: "[]", invalid: "[]"},
		{pattern: "PAYMENTS-K*", includeThisCluster: true, apps: "[PAYMENTS-K8S]", children: "[payments-k8s]", invalid: "[]"},
		{pattern: "*PAYMENTS*", apps: "[BILLING-PAYMENTS-X PAYMENTS PAYMENTS-A.B PAYMENTS-EU PAYMENTS-US PAYMENTS-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX PAYMENTS_OLD]",
			children: "[billing-payments-x payments payments-eu payments-us]", invalid: "[PAYMENTS-A.B PAYMENTS-XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX PAYMENTS_OLD]"},
		{pattern: "*-eu", apps: "[PAYMENTS-EU]", children: "[payments-eu]", invalid: "[]"},
		{pattern: "NOTHING-*", apps: "[]", children: "[]", invalid: "[]"},
	} {
		parent := patternParent(c.pattern)
		parent.Spec.IncludeThisCluster = c.includeThisCluster
		m := matchPattern(parent, apps, instancesOf, planTestCluster, patternCap{})
		var children, invalid []string
		for _, ch := range m.children {
			children = append(children, ch.Name)
			if ch.Spec.App != strings.ToUpper(ch.Name) {
				t.Errorf("%s: import %s of app %s", c.pattern, ch.Name, ch.Spec.App)
			}
			if errs := validation.IsDNS1035Label(ch.EffectiveServiceName()); len(errs) > 0 {
				t.Errorf("%s: Service name %q: %v", c.pattern, ch.EffectiveServiceName(), errs)
			}
		}
		for _, s := range m.invalid {
			invalid = append(invalid, s.App)
			if s.Reason != v1alpha1.ReasonInvalidName || !strings.Contains(s.Message, "spec.service.name") {
				t.Errorf("%s: skipped %+v", c.pattern, s)
			}
		}
		got := fmt.Sprint(fmt.Sprint(m.apps), fmt.Sprint(children), fmt.Sprint(invalid))
		if want := fmt.Sprint(c.apps, c.children, c.invalid); got != want {
			t.Errorf("%s (includeThisCluster %v):\n got %s\nwant %s", c.pattern, c.includeThisCluster, got, want)
		}
	}
}

func TestPatternChild_CopiesTheParentsSpecForItsApp(t *testing.T) {
	parent := patternParent("PAY*")
	parent.Spec.IncludeThisCluster = true
	c := patternChild(parent, "PAYMENTS", "payments")
	if c.Namespace != parent.Namespace || c.Name != "payments" || c.Labels[v1alpha1.ImportPatternLabel] != "shop" {
		t.Errorf("meta %+v", c.ObjectMeta)
	}
	want := parent.Spec.DeepCopy()
	want.App = "PAYMENTS"
	if fmt.Sprintf("%+v", c.Spec) != fmt.Sprintf("%+v", *want) || c.IsPattern() {
		t.Errorf("spec %+v, want %+v", c.Spec, *want)
	}
	// A copy: changing the child leaves the parent as it is.
	c.Spec.Service.Ports[0].Port = 1
	c.Spec.Eureka.ServiceURLs[0] = "changed"
	if parent.Spec.Service.Ports[0].Port != 443 || parent.Spec.Eureka.ServiceURLs[0] == "changed" {
		t.Error("the child shares the parent's spec")
	}
}

func TestPatternLabelValue_IsAlwaysAValidLabelValue(t *testing.T) {
	for _, name := range []string{"shop", strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a.b-", 60) + "c"} {
		v := patternLabelValue(name)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("%q: %q: %v", name, v, errs)
		}
		if len(name) <= 63 && v != name {
			t.Errorf("%q shortened to %q", name, v)
		}
	}
	if patternLabelValue(strings.Repeat("a", 64)) == patternLabelValue(strings.Repeat("a", 65)) {
		t.Error("two long names share a label value")
	}
}

// existingImport is an import of the namespace: the parent's when owned.
func existingImport(parent *v1alpha1.EurekaImport, name string, owned bool) v1alpha1.EurekaImport {
	imp := patternChild(parent, strings.ToUpper(name), name)
	imp.UID = types.UID("uid-" + name)
	if owned {
		imp.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "EurekaImport", Name: parent.Name, UID: parent.UID, Controller: ptr.To(true)}}
	} else {
		imp.Labels = nil
	}
	return *imp
}

func TestPlanPatternActions_TouchesOnlyItsOwnImports(t *testing.T) {
	parent := patternParent("PAY*")
	want := []*v1alpha1.EurekaImport{
		patternChild(parent, "PAYMENTS", "payments"), // exists, unchanged
		patternChild(parent, "PAYROLL", "payroll"),   // exists, its ports changed by hand
		patternChild(parent, "PAYOUTS", "payouts"),   // new
		patternChild(parent, "PAYDAY", "payday"),     // a team's own import holds the name
		patternChild(parent, "PAYSHOP", "shop"),      // the parent's own name
	}
	drifted := existingImport(parent, "payroll", true)
	drifted.Spec.Service.Ports = nil
	other := existingImport(parent, "payday", false)
	otherPattern := existingImport(parent, "paypal", false)
	otherPattern.OwnerReferences = []metav1.OwnerReference{{Kind: "EurekaImport", Name: "other", UID: "other-uid", Controller: ptr.To(true)}}
	existing := []v1alpha1.EurekaImport{
		existingImport(parent, "payments", true), drifted, other, *parent.DeepCopy(),
		existingImport(parent, "paygone", true), // its app left: deleted
		otherPattern,                            // another pattern's: left alone
	}
	before := fmt.Sprintf("%+v", existing)
	a := planPatternActions(parent, want, existing)
	namesOf := func(imps []*v1alpha1.EurekaImport) string {
		var out []string
		for _, i := range imps {
			out = append(out, i.Name)
		}
		return fmt.Sprint(out)
	}
	if got := namesOf(a.create); got != "[payouts]" {
		t.Errorf("create %s", got)
	}
	if got := namesOf(a.update); got != "[payroll]" || len(a.update[0].Spec.Service.Ports) != 1 {
		t.Errorf("update %s: %+v", got, a.update)
	}
	if got := namesOf(a.remove); got != "[paygone]" {
		t.Errorf("remove %s", got)
	}
	if got := namesOf(a.kept); got != "[payments payroll]" {
		t.Errorf("kept %s", got)
	}
	if len(a.notOwned) != 2 || a.notOwned[0].App != "PAYDAY" || !strings.Contains(a.notOwned[0].Message, "EurekaImport payday exists and is not this pattern's (an import of PAYDAY of its own)") ||
		a.notOwned[1].App != "PAYSHOP" || !strings.Contains(a.notOwned[1].Message, "this pattern import's own name") {
		t.Errorf("notOwned %+v", a.notOwned)
	}
	if after := fmt.Sprintf("%+v", existing); after != before {
		t.Error("planPatternActions changed the imports it was given")
	}
}

func TestPatternSynced_SumsUpTheAppsImports(t *testing.T) {
	child := func(app string, gen, observed int64, conds ...metav1.Condition) *v1alpha1.EurekaImport {
		c := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(app), Generation: gen}, Spec: v1alpha1.EurekaImportSpec{App: app}}
		c.Status.ObservedGeneration, c.Status.Conditions = observed, conds
		c.Status.ReadyEndpoints, c.Status.TotalEndpoints = 1, 2
		return c
	}
	cond := func(typ string, ok bool, reason string) metav1.Condition {
		st := metav1.ConditionFalse
		if ok {
			st = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: st, Reason: reason}
	}
	permitted := cond(v1alpha1.ConditionPermitted, true, v1alpha1.ReasonPermitted)
	kept := []*v1alpha1.EurekaImport{
		child("PAYMENTS", 1, 1, permitted, cond(v1alpha1.ConditionSynced, true, "Imported")),
		child("LEDGER", 1, 1, permitted, cond(v1alpha1.ConditionSynced, true, v1alpha1.ReasonLeasesExpired)),
		child("TREASURY", 1, 1, cond(v1alpha1.ConditionPermitted, false, "AppNotGranted"), cond(v1alpha1.ConditionSynced, false, "AppNotGranted")),
		child("STOCK", 2, 1, permitted, cond(v1alpha1.ConditionSynced, true, "Imported")), // a spec not yet seen
		child("BILLING", 1, 1, permitted, cond(v1alpha1.ConditionSynced, false, "NoInstances")),
	}
	s := summarizeChildren(kept)
	if fmt.Sprint(s.imported, s.refused, s.pending, s.ready, s.total) != "[LEDGER PAYMENTS] [TREASURY (AppNotGranted)] [BILLING (NoInstances) STOCK (not reconciled yet)] 4 8" {
		t.Errorf("summary %+v", s)
	}
	m := patternMatch{apps: []string{"BILLING", "LEDGER", "ODD_APP", "PAYMENTS", "STOCK", "TREASURY"}}
	skipped := []v1alpha1.SkippedApp{{App: "ODD_APP", Reason: v1alpha1.ReasonInvalidName}}
	ok, reason, msg := patternSynced("*", m, skipped, s)
	if want := "2 of 6 apps matching *: 2 apps imported: LEDGER, PAYMENTS; 1 refused by the policy: TREASURY (AppNotGranted); 2 not synced: BILLING (NoInstances), STOCK (not reconciled yet); 1 skipped, the name lower-cased no valid Service name: ODD_APP"; ok || reason != reasonPartlyImported || msg != want {
		t.Errorf("Synced %v %s %q,\nwant false %s %q", ok, reason, msg, reasonPartlyImported, want)
	}
	all := summarizeChildren(kept[:2])
	if ok, reason, msg := patternSynced("*", patternMatch{apps: []string{"LEDGER", "PAYMENTS"}}, nil, all); !ok || reason != reasonPatternImported || msg != "2 apps imported: LEDGER, PAYMENTS" {
		t.Errorf("Synced %v %s %q", ok, reason, msg)
	}
	if ok, reason, _ := patternSynced("NONE-*", patternMatch{}, nil, patternSummary{}); ok || reason != reasonNoMatchingApps {
		t.Errorf("no app: Synced %v %s", ok, reason)
	}
}

func TestImportPattern_TheCapKeepsTheAppsImportedAlreadyThenTheFirstByName(t *testing.T) {
	apps := []string{"A", "B", "C", "D", "E"}
	for _, tc := range []struct {
		name       string
		cap        patternCap
		kept, left string
	}{
		{"under the cap", patternCap{max: 5}, "A B C D E", ""},
		{"first by name", patternCap{max: 2}, "A B", "C D E"},
		{"imported ones keep their place", patternCap{max: 2, current: func(a string) bool { return a == "D" }}, "A D", "B C E"},
		{"more imported than the cap", patternCap{max: 2, current: func(a string) bool { return a != "A" }}, "B C", "A D E"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, left := tc.cap.capApps(apps)
			if strings.Join(kept, " ") != tc.kept || strings.Join(left, " ") != tc.left {
				t.Errorf("kept %v left %v, want %q and %q", kept, left, tc.kept, tc.left)
			}
		})
	}
}
