package builders_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/webhook/webhooktest"
)

func TestSyncer_RegistersTheAppsPodsOnTheirPortNamedHTTP(t *testing.T) {
	s := builders.Syncer("shop", "orders")
	if s.Namespace != "shop" || s.Name != "orders" {
		t.Errorf("syncer %s/%s, want shop/orders", s.Namespace, s.Name)
	}
	if got := s.Spec.Selector.MatchLabels; len(got) != 1 || got["app"] != "orders" || len(s.Spec.Selector.MatchExpressions) != 0 {
		t.Errorf("selector %+v, want app=orders", s.Spec.Selector)
	}
	if s.Spec.Port != intstr.FromString("http") {
		t.Errorf("port %v, want the port named http", s.Spec.Port.String())
	}
}

// The builder sets no default of its own: mode, traffic and lease are the
// API server's, and the syncer it builds is one the API server admits.
func TestSyncer_LeavesTheDefaultsToTheAPIServerWhichAdmitsIt(t *testing.T) {
	s := builders.Syncer("shop", "orders")
	if s.Spec.Mode != "" || s.Spec.Traffic != "" || s.Spec.Lease != (v1alpha1.Lease{}) {
		t.Errorf("mode %q, traffic %q, lease %+v: want them unset, for the API server to default", s.Spec.Mode, s.Spec.Traffic, s.Spec.Lease)
	}
	admitted, err := webhooktest.AdmitSyncer(s)
	if err != nil {
		t.Fatalf("the API server refuses the built syncer: %v", err)
	}
	if admitted.Spec.Mode != v1alpha1.ModePod || admitted.Spec.Traffic != v1alpha1.TrafficServe {
		t.Errorf("admitted with mode %q, traffic %q; want Pod, Serve", admitted.Spec.Mode, admitted.Spec.Traffic)
	}
}

func TestSyncer_EveryOptionMakesASyncerTheAPIServerAdmits(t *testing.T) {
	for name, opts := range map[string][]builders.SyncerOption{
		"Pod mode, every option": {
			builders.Selecting("orders-v2"), builders.Port(intstr.FromInt32(8080)), builders.AppName("orders"),
			builders.EurekaURLs("http://eureka-1:8761/eureka", "http://eureka-2:8761/eureka"), builders.Credentials("eureka-login"),
			builders.Traffic(v1alpha1.TrafficStandby), builders.Drain(5), builders.Metadata(map[string]string{"zone": "zone-a"}),
			builders.HealthCheck(v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckHTTP, Path: "/ready"}),
			builders.CreatedAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
		"Service mode": {builders.ServiceMode("orders"), builders.Port(intstr.FromInt32(80)), builders.Traffic(v1alpha1.TrafficStandby)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := webhooktest.AdmitSyncer(builders.Syncer("shop", "orders", opts...)); err != nil {
				t.Errorf("the API server refuses it: %v", err)
			}
		})
	}
}

func TestSyncer_OptionsApplyInOrderAndNilOnesAreSkipped(t *testing.T) {
	metadata := map[string]string{"zone": "zone-a"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ready := metav1.Condition{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionTrue}
	s := builders.Syncer("shop", "orders",
		builders.Selecting("billing"), nil, builders.Port(intstr.FromInt32(9090)), builders.AppName("ORDERS-V2"),
		builders.EurekaURLs("http://eureka:8761/eureka"), builders.Credentials("eureka-login"),
		builders.Traffic(v1alpha1.TrafficStandby), builders.Drain(0), builders.Metadata(metadata),
		builders.HealthCheck(v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckTCP}), builders.CreatedAt(at), builders.Conditions(ready),
		func(s *v1alpha1.EurekaSyncer) { s.Spec.VIPAddress = "orders-vip" },
	)
	metadata["zone"] = "changed after"
	switch {
	case s.Spec.Selector.MatchLabels["app"] != "billing":
		t.Errorf("Selecting: selector %+v", s.Spec.Selector)
	case s.Spec.Port != intstr.FromInt32(9090):
		t.Errorf("Port: %s", s.Spec.Port.String())
	case s.Spec.AppName != "ORDERS-V2":
		t.Errorf("AppName: %q", s.Spec.AppName)
	case len(s.Spec.Eureka.ServiceURLs) != 1 || s.Spec.Eureka.ServiceURLs[0] != "http://eureka:8761/eureka":
		t.Errorf("EurekaURLs: %v", s.Spec.Eureka.ServiceURLs)
	case s.Spec.Eureka.CredentialsSecretRef == nil || s.Spec.Eureka.CredentialsSecretRef.Name != "eureka-login":
		t.Errorf("Credentials: %+v", s.Spec.Eureka.CredentialsSecretRef)
	case s.Spec.Traffic != v1alpha1.TrafficStandby:
		t.Errorf("Traffic: %q", s.Spec.Traffic)
	case s.Spec.Drain.PreStopSleepSeconds == nil || *s.Spec.Drain.PreStopSleepSeconds != 0:
		t.Errorf("Drain(0): %v, want a drain of 0 s (none), not the default", s.Spec.Drain.PreStopSleepSeconds)
	case s.Spec.Metadata["zone"] != "zone-a":
		t.Errorf("Metadata: %v, want a copy of the map given", s.Spec.Metadata)
	case s.Spec.HealthCheck == nil || s.Spec.HealthCheck.Type != v1alpha1.HealthCheckTCP:
		t.Errorf("HealthCheck: %+v", s.Spec.HealthCheck)
	case !s.CreationTimestamp.Time.Equal(at):
		t.Errorf("CreatedAt: %v", s.CreationTimestamp)
	case len(s.Status.Conditions) != 1 || s.Status.Conditions[0] != ready:
		t.Errorf("Conditions: %+v", s.Status.Conditions)
	case s.Spec.VIPAddress != "orders-vip":
		t.Errorf("a closure of the test's own: VIP address %q", s.Spec.VIPAddress)
	}
}

func TestSyncer_ServiceModeClearsTheSelector(t *testing.T) {
	s := builders.Syncer("shop", "orders", builders.ServiceMode("orders-svc"))
	if s.EffectiveMode() != v1alpha1.ModeService || s.Spec.Service == nil || s.Spec.Service.Name != "orders-svc" {
		t.Errorf("mode %q, service %+v; want Service mode registering orders-svc", s.Spec.Mode, s.Spec.Service)
	}
	if len(s.Spec.Selector.MatchLabels) != 0 || len(s.Spec.Selector.MatchExpressions) != 0 {
		t.Errorf("selector %+v, want none: the Service's picks the pods", s.Spec.Selector)
	}
}
