package admission

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := syncer(ns, "orders", tc.mutate)
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
	t.Run("a valid syncer is accepted", func(t *testing.T) {
		if err := suite.c.Create(ctx, syncer(ns, "orders", nil)); err != nil {
			t.Fatalf("a valid syncer was refused: %v", err)
		}
	})
}
