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
		Conditions:   []metav1.Condition{{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionTrue, Reason: "InSync"}},
	}
	return s
}

func service() v1alpha1.EurekaSyncer {
	return *builders.Syncer("pay", "billing", builders.ServiceMode("billing"), builders.Port(intstr.FromInt32(80)), builders.AppName("billing"),
		builders.CreatedAt(testNow.Add(-49*time.Hour)))
}

func TestStatus_TableShowsTheMigrationViewFromTheStatus(t *testing.T) {
	list := &v1alpha1.EurekaSyncerList{Items: []v1alpha1.EurekaSyncer{migrating(), service()}}
	var out strings.Builder
	if err := printStatus(&out, list, "", testNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "status/table.golden.txt", out.String())

	out.Reset()
	if err := printStatus(&out, list, "wide", testNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "status/wide.golden.txt", out.String())
}

func TestStatus_YAMLAndJSONAreTheSyncersThemselves(t *testing.T) {
	for _, format := range []string{"yaml", "json"} {
		list := &v1alpha1.EurekaSyncerList{Items: []v1alpha1.EurekaSyncer{migrating()}}
		var out strings.Builder
		if err := printStatus(&out, list, format, testNow); err != nil {
			t.Fatal(err)
		}
		var back v1alpha1.EurekaSyncerList
		var err error
		if format == "yaml" {
			err = yaml.UnmarshalStrict([]byte(out.String()), &back)
		} else {
			err = json.Unmarshal([]byte(out.String()), &back)
		}
		if err != nil || back.Kind != "EurekaSyncerList" || len(back.Items) != 1 || back.Items[0].Status.Elsewhere != "2/2" {
			t.Errorf("-o %s: %v\n%s", format, err, out.String())
		}
	}
}
