package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/sidecar"
)

func TestServiceInstanceID_IsUniquePerNamespaceAndClusterAndHasNoSlash(t *testing.T) {
	addr := serviceAddress{Host: "203.0.113.7", Port: 80}
	id := serviceInstanceID(addr, "ORDERS", "orders", "shop", "prod-eu-1")
	if !strings.HasPrefix(id, "203.0.113.7:orders:80:orders.shop.") || len(id) != len("203.0.113.7:orders:80:orders.shop.")+8 {
		t.Fatalf("id %q, want 203.0.113.7:orders:80:orders.shop.<8 hex digits>", id)
	}
	// Cluster ids that share a prefix still differ.
	if serviceInstanceID(addr, "ORDERS", "orders", "shop-2", "prod-eu-1") == id || serviceInstanceID(addr, "ORDERS", "orders", "shop", "prod-eu-2") == id {
		t.Fatal("the id does not tell namespaces or clusters apart")
	}
	if got := serviceInstanceID(addr, "ORDERS", "orders", "shop", "a/b"); strings.Contains(got, "/") {
		t.Fatalf("id %q has a '/'", got)
	}
}

func TestServiceInstances_CarryTheMarkersAndTheStatusOfTheEndpoints(t *testing.T) {
	s := builders.Syncer("shop", "orders", builders.ServiceMode("orders-svc"), builders.Port(intstr.FromInt32(80)),
		builders.Metadata(map[string]string{"zone": "eu-1", eureka.MetaCluster: "forged"}),
		func(s *v1alpha1.EurekaSyncer) {
			s.Spec.Lease = v1alpha1.Lease{RenewalIntervalSeconds: 5, DurationSeconds: 15}
		})
	res := serviceResolution{addresses: []serviceAddress{{Host: "lb.example.com", Port: 80}}, readyEndpoints: 0}
	insts := serviceInstances(s, res, "cluster-1")
	if len(insts) != 1 {
		t.Fatalf("%d instances", len(insts))
	}
	inst := insts[0]
	if inst.App != "ORDERS" || inst.HostName != "lb.example.com" || inst.IPAddr != "lb.example.com" || inst.Port != 80 || !inst.PortEnabled ||
		inst.VIPAddress != "orders" || inst.SecureVIPAddress != "orders" || inst.Status != eureka.StatusDown || inst.OverriddenStatus != "" ||
		inst.RenewalInterval != 5*time.Second || inst.Duration != 15*time.Second {
		t.Fatalf("instance %+v", inst)
	}
	want := map[string]string{"zone": "eu-1", eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: "cluster-1",
		eureka.MetaNamespace: "shop", eureka.MetaSyncer: "orders", eureka.MetaService: "orders-svc"}
	if len(inst.Metadata) != len(want) || !inst.HasMetadata(want) {
		t.Fatalf("metadata %v, want %v (no pod uid: orphan collection must skip it)", inst.Metadata, want)
	}

	s.Spec.Traffic, s.Spec.VIPAddress = v1alpha1.TrafficStandby, "orders-vip"
	res.readyEndpoints = 2
	inst = serviceInstances(s, res, "cluster-1")[0]
	if inst.Status != eureka.StatusUp || inst.OverriddenStatus != eureka.StatusOutOfService || inst.VIPAddress != "orders-vip" {
		t.Fatalf("Standby with ready endpoints: %+v", inst)
	}
	if len(serviceInstances(s, serviceResolution{reason: reasonNoReachableAddress}, "cluster-1")) != 0 {
		t.Fatal("an unreachable Service is registered")
	}
}

func TestServiceInstances_AreSpringShapedAtTheServiceAddress(t *testing.T) {
	syncer := func(mutate func(*v1alpha1.EurekaSyncerSpec)) *v1alpha1.EurekaSyncer {
		s := builders.Syncer("shop", "orders", builders.ServiceMode("orders")) // on the Service's port http
		if mutate != nil {
			mutate(&s.Spec)
		}
		return s
	}
	res := func(port corev1.ServicePort) serviceResolution {
		return serviceResolution{addresses: []serviceAddress{{Host: "lb.example.com", Port: 8080}}, port: port, readyEndpoints: 1}
	}
	for name, tc := range map[string]struct {
		syncer                    *v1alpha1.EurekaSyncer
		port                      corev1.ServicePort
		home, status, health, ctx string
	}{
		"an HTTP port: the actuator's info and health on it": {
			syncer: syncer(nil), port: corev1.ServicePort{Name: "http", Port: 8080},
			home: "http://lb.example.com:8080/", status: "http://lb.example.com:8080/actuator/info", health: "http://lb.example.com:8080/actuator/health",
		},
		"a base path of its own, in the metadata too": {
			syncer: syncer(func(s *v1alpha1.EurekaSyncerSpec) { s.Management = &v1alpha1.Management{BasePath: "/manage"} }),
			port:   corev1.ServicePort{Name: "http", Port: 8080},
			home:   "http://lb.example.com:8080/", status: "http://lb.example.com:8080/manage/info", health: "http://lb.example.com:8080/manage/health", ctx: "/manage",
		},
		"a gRPC port by name: no URLs": {syncer: syncer(nil), port: corev1.ServicePort{Name: "grpc-api", Port: 8080}},
		"a port whose appProtocol says tls: no URLs": {
			syncer: syncer(nil), port: corev1.ServicePort{Name: "web", Port: 8080, AppProtocol: ptr.To("tls")},
		},
		"spec.protocol TCP wins over an http name": {
			syncer: syncer(func(s *v1alpha1.EurekaSyncerSpec) { s.Protocol = v1alpha1.ProtocolTCP }), port: corev1.ServicePort{Name: "http", Port: 8080},
		},
	} {
		inst := serviceInstances(tc.syncer, res(tc.port), "cluster-1")[0]
		if inst.HomePageURL != tc.home || inst.StatusPageURL != tc.status || inst.HealthCheckURL != tc.health {
			t.Errorf("%s: URLs %q %q %q, want %q %q %q", name, inst.HomePageURL, inst.StatusPageURL, inst.HealthCheckURL, tc.home, tc.status, tc.health)
		}
		if got := inst.Metadata[sidecar.MetaManagementContextPath]; got != tc.ctx {
			t.Errorf("%s: metadata %s = %q, want %q", name, sidecar.MetaManagementContextPath, got, tc.ctx)
		}
		if _, ok := inst.Metadata[sidecar.MetaManagementPort]; ok {
			t.Errorf("%s: metadata names a management port: the actuator answers on the registered one", name)
		}
	}
}
