package admission

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
)

func TestSyncer_TheAPIServerRefusesInvalidSpecsWithAClearMessage(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(ctx, t, "syncers", nil)
	cases := []struct {
		name   string
		mutate func(*eurekubev1alpha1.EurekaSyncer)
		want   []string
	}{
		{"port 0", func(s *eurekubev1alpha1.EurekaSyncer) { s.Spec.Port = intstr.FromInt32(0) },
			[]string{"spec.port", "port must be a number from 1 to 65535"}},
		{"empty selector", func(s *eurekubev1alpha1.EurekaSyncer) { s.Spec.Selector = metav1.LabelSelector{} },
			[]string{"spec.selector", "selector must not be empty"}},
		{"negative drain", func(s *eurekubev1alpha1.EurekaSyncer) { s.Spec.Drain.PreStopSleepSeconds = ptr(int32(-1)) },
			[]string{"spec.drain.preStopSleepSeconds", "greater than or equal to 0"}},
		{"malformed Eureka URL", func(s *eurekubev1alpha1.EurekaSyncer) { s.Spec.Eureka.ServiceURLs = []string{"eureka:8761"} },
			[]string{"spec.eureka.serviceURLs", "every serviceURL must be an absolute http:// or https:// URL"}},
		{"unknown traffic", func(s *eurekubev1alpha1.EurekaSyncer) { s.Spec.Traffic = "Drain" },
			[]string{"spec.traffic", `supported values: "Serve", "Standby"`}},
		{"Service mode without a Service", func(s *eurekubev1alpha1.EurekaSyncer) {
			s.Spec.Mode, s.Spec.Selector = eurekubev1alpha1.ModeService, metav1.LabelSelector{}
		}, []string{"spec.service", "service is required in Service mode"}},
		{"Service mode with a selector", func(s *eurekubev1alpha1.EurekaSyncer) {
			s.Spec.Mode, s.Spec.Service = eurekubev1alpha1.ModeService, &eurekubev1alpha1.ServiceTarget{Name: "orders"}
		}, []string{"spec.selector", "selector is not allowed in Service mode"}},
		{"Pod mode naming a Service", func(s *eurekubev1alpha1.EurekaSyncer) {
			s.Spec.Service = &eurekubev1alpha1.ServiceTarget{Name: "orders"}
		}, []string{"spec.service", "not allowed in Pod mode"}},
		{"Service mode with a drain", func(s *eurekubev1alpha1.EurekaSyncer) {
			s.Spec.Mode, s.Spec.Selector = eurekubev1alpha1.ModeService, metav1.LabelSelector{}
			s.Spec.Service = &eurekubev1alpha1.ServiceTarget{Name: "orders"}
			s.Spec.Drain.PreStopSleepSeconds = ptr(int32(30))
		}, []string{"healthCheck, drain, sidecar, securePort and management.port apply to Pod mode only"}},
		{"Service mode with a management port", func(s *eurekubev1alpha1.EurekaSyncer) {
			s.Spec.Mode, s.Spec.Selector = eurekubev1alpha1.ModeService, metav1.LabelSelector{}
			s.Spec.Service = &eurekubev1alpha1.ServiceTarget{Name: "orders"}
			port := intstr.FromString("management")
			s.Spec.Management = &eurekubev1alpha1.Management{Port: &port}
		}, []string{"the actuator answering on it"}},
		{"an address with a forced address type", func(s *eurekubev1alpha1.EurekaSyncer) {
			s.Spec.Mode, s.Spec.Selector = eurekubev1alpha1.ModeService, metav1.LabelSelector{}
			s.Spec.Service = &eurekubev1alpha1.ServiceTarget{Name: "orders", Address: "203.0.113.7", AddressType: eurekubev1alpha1.AddressNodePort}
		}, []string{"spec.service", "address and addressType contradict each other"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := builders.Syncer(ns, "orders", tc.mutate)
			err := suite.c.Create(ctx, s)
			if err == nil {
				t.Fatalf("the API server accepted a syncer with %s", tc.name)
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("error is not a validation error (422): %v", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not mention %q: %v", want, err)
				}
			}
		})
	}
	t.Run("a valid syncer is accepted, Pod mode and Serve by default", func(t *testing.T) {
		s := builders.Syncer(ns, "orders")
		if err := suite.c.Create(ctx, s); err != nil {
			t.Fatalf("a valid syncer was refused: %v", err)
		}
		if s.Spec.Mode != eurekubev1alpha1.ModePod || s.Spec.Traffic != eurekubev1alpha1.TrafficServe {
			t.Errorf("defaults: mode %q, traffic %q; want Pod, Serve", s.Spec.Mode, s.Spec.Traffic)
		}
	})
	t.Run("mode cannot change", func(t *testing.T) {
		s := builders.Syncer(ns, "billing")
		if err := suite.c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		// A patch, as kubectl sends: the manager may have written the
		// syncer (finalizer, status) since it was created.
		base := s.DeepCopy()
		s.Spec.Mode, s.Spec.Selector = eurekubev1alpha1.ModeService, metav1.LabelSelector{}
		s.Spec.Service = &eurekubev1alpha1.ServiceTarget{Name: "billing"}
		err := suite.c.Patch(ctx, s, client.MergeFrom(base))
		if err == nil || !strings.Contains(err.Error(), "spec.mode") || !strings.Contains(err.Error(), "mode cannot change") {
			t.Fatalf("changing the mode: %v, want a refusal naming spec.mode", err)
		}
	})
	t.Run("a valid Service-mode syncer in Standby is accepted", func(t *testing.T) {
		s := builders.Syncer(ns, "catalog", builders.ServiceMode("catalog"), builders.Traffic(eurekubev1alpha1.TrafficStandby), func(s *eurekubev1alpha1.EurekaSyncer) {
			s.Spec.Service.Address = "catalog.example.com"
		})
		if err := suite.c.Create(ctx, s); err != nil {
			t.Fatalf("a valid Service-mode syncer was refused: %v", err)
		}
		if s.Spec.Service.AddressType != eurekubev1alpha1.AddressAuto {
			t.Errorf("addressType defaults to %q, want Auto", s.Spec.Service.AddressType)
		}
	})
}
