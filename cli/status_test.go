package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
)

var testNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// migrating is a syncer halfway through a migration: Standby here, the VMs
// still serving.
func migrating() v1alpha1.EurekaSyncer {
	s := *builders.Syncer("shop", "orders", builders.Traffic(v1alpha1.TrafficStandby), builders.CreatedAt(testNow.Add(-5*time.Minute)))
	s.Status = v1alpha1.EurekaSyncerStatus{
		AppName: "ORDERS", Ready: "0/3", SelectedPods: 3, InjectedPods: 3, RegisteredInstances: 3,
		OutOfServiceInstances: 3, ElsewhereInstances: 2, ElsewhereUpInstances: 2, Elsewhere: "2/2",
		TrafficTo: v1alpha1.TrafficToElsewhere, OutdatedRegistrarPods: 1,
		LastSyncTime: &metav1.Time{Time: testNow.Add(-20 * time.Second)},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionTrue, Reason: "InSync"},
			{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionTrue, Reason: "Permitted"}},
	}
	return s
}

// squatter is a syncer of a namespace that named an app another namespace
// registered first: refused, its selector matching nothing.
func squatter() v1alpha1.EurekaSyncer {
	s := *builders.Syncer("evil", "probe", builders.AppName("PROBE"), builders.CreatedAt(testNow.Add(-2*time.Minute)))
	s.Status = v1alpha1.EurekaSyncerStatus{
		AppName: "PROBE", Ready: "0/0", Elsewhere: "0/0", TrafficTo: v1alpha1.TrafficToNowhere,
		LastSyncTime: &metav1.Time{Time: testNow.Add(-30 * time.Second)},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse, Reason: "AppOwnedByAnotherNamespace"},
			{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionFalse, Reason: "AppOwnedByAnotherNamespace"}},
	}
	return s
}

func service() v1alpha1.EurekaSyncer {
	return *builders.Syncer("pay", "billing", builders.ServiceMode("billing"), builders.Port(intstr.FromInt32(80)), builders.AppName("billing"),
		builders.CreatedAt(testNow.Add(-49*time.Hour)))
}

// vmOnly is an import of an app that runs on VMs only, one of its three
// instances not UP.
func vmOnly() v1alpha1.EurekaImport {
	imp := v1alpha1.EurekaImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments", CreationTimestamp: metav1.NewTime(testNow.Add(-3 * time.Hour))},
		Spec:       v1alpha1.EurekaImportSpec{App: "payments"},
	}
	imp.Status = v1alpha1.EurekaImportStatus{
		App: "PAYMENTS", ServiceName: "payments", Endpoints: "2/3", ReadyEndpoints: 2, TotalEndpoints: 3,
		LastSyncTime: &metav1.Time{Time: testNow.Add(-12 * time.Second)},
		Conditions:   []metav1.Condition{{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionTrue, Reason: "Imported"}},
	}
	return imp
}

// stale is a headless import whose Eureka has not answered for 7 minutes:
// its endpoints stay as last read.
func stale() v1alpha1.EurekaImport {
	imp := v1alpha1.EurekaImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pay", Name: "ledger", CreationTimestamp: metav1.NewTime(testNow.Add(-49 * time.Hour))},
		Spec:       v1alpha1.EurekaImportSpec{App: "LEDGER-V2", Service: v1alpha1.ImportService{Name: "ledger", Type: v1alpha1.ImportHeadless}},
	}
	imp.Status = v1alpha1.EurekaImportStatus{
		App: "LEDGER-V2", ServiceName: "ledger", Endpoints: "4/4", ReadyEndpoints: 4, TotalEndpoints: 4,
		LastSyncTime: &metav1.Time{Time: testNow.Add(-7 * time.Minute)},
		Conditions:   []metav1.Condition{{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse, Reason: "EurekaUnreachable"}},
	}
	return imp
}

// intruder is an import of an app another namespace owns, refused.
func intruder() v1alpha1.EurekaImport {
	imp := v1alpha1.EurekaImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "evil", Name: "orders", CreationTimestamp: metav1.NewTime(testNow.Add(-time.Minute))},
		Spec:       v1alpha1.EurekaImportSpec{App: "ORDERS"},
	}
	imp.Status = v1alpha1.EurekaImportStatus{
		App: "ORDERS", ServiceName: "orders",
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse, Reason: "AppNotGranted"},
			{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionFalse, Reason: "AppNotGranted"}},
	}
	return imp
}

// A refusal shows in the table, as PERMITTED False with its reason; a
// status of a manager that wrote no Permitted condition shows "-".
func TestStatus_TableShowsTheMigrationViewFromTheStatus(t *testing.T) {
	syncers := []v1alpha1.EurekaSyncer{migrating(), service(), squatter()}
	imports := []v1alpha1.EurekaImport{vmOnly(), stale(), intruder()}
	var out strings.Builder
	if err := printStatus(&out, syncers, imports, "", testNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "status/table.golden.txt", out.String())

	out.Reset()
	if err := printStatus(&out, syncers, imports, "wide", testNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "status/wide.golden.txt", out.String())
}

func TestStatus_ImportsAloneMakeTheirOwnTable(t *testing.T) {
	var out strings.Builder
	if err := printStatus(&out, nil, []v1alpha1.EurekaImport{vmOnly()}, "", testNow); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAMESPACE   NAME       APP        SERVICE    ENDPOINTS") ||
		strings.Join(strings.Fields(lines[1]), " ") != "shop payments PAYMENTS payments 2/3 - True 12s ago Imported 3h" {
		t.Errorf("imports without syncers:\n%s", out.String())
	}
}

func TestStatus_YAMLAndJSONAreTheSyncersAndImportsThemselves(t *testing.T) {
	for _, format := range []string{"yaml", "json"} {
		var out strings.Builder
		if err := printStatus(&out, []v1alpha1.EurekaSyncer{migrating()}, []v1alpha1.EurekaImport{vmOnly()}, format, testNow); err != nil {
			t.Fatal(err)
		}
		var back struct {
			Kind  string
			Items []json.RawMessage
		}
		var err error
		if format == "yaml" {
			err = yaml.Unmarshal([]byte(out.String()), &back)
		} else {
			err = json.Unmarshal([]byte(out.String()), &back)
		}
		if err != nil || back.Kind != "List" || len(back.Items) != 2 {
			t.Fatalf("-o %s: %v\n%s", format, err, out.String())
		}
		var s v1alpha1.EurekaSyncer
		var imp v1alpha1.EurekaImport
		if err := json.Unmarshal(back.Items[0], &s); err != nil || s.Kind != "EurekaSyncer" || s.Status.Elsewhere != "2/2" {
			t.Errorf("-o %s: the first item is not the syncer (%v):\n%s", format, err, back.Items[0])
		}
		if err := json.Unmarshal(back.Items[1], &imp); err != nil || imp.Kind != "EurekaImport" || imp.Status.Endpoints != "2/3" {
			t.Errorf("-o %s: the second item is not the import (%v):\n%s", format, err, back.Items[1])
		}
	}
}
