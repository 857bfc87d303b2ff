package webhook

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
)

// What Spring tools read of an injected pod's instance: the actuator's
// URLs, the management metadata, the zone, and no URLs at all for a port
// that does not speak HTTP.
func TestInject_InstancesAreShapedAsSpringToolsExpect(t *testing.T) {
	withProbe := func(port intstr.IntOrString, path string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe.HTTPGet = &corev1.HTTPGetAction{Path: path, Port: port}
		}
	}
	managementPort := func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "management", ContainerPort: 8081})
	}
	grpcOnly := func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Ports = []corev1.ContainerPort{{Name: "grpc", ContainerPort: 9090}}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}
	}
	tests := []struct {
		name       string
		pod        []func(*corev1.Pod)
		syncer     func(*v1alpha1.EurekaSyncer)
		annotation map[string]string

		wantProtocol             string
		wantStatus, wantHealth   string
		wantMeta                 map[string]string // "" : must be absent
		wantHealthType           string
		wantHealthPort, wantZone bool
	}{{
		name:         "actuator on the app's port: Spring's defaults, no management metadata",
		wantProtocol: sidecar.ProtocolHTTP, wantStatus: "http://10.0.0.7:8080/actuator/info", wantHealth: "http://10.0.0.7:8080/actuator/health",
		wantMeta: map[string]string{sidecar.MetaManagementPort: "", sidecar.MetaManagementContextPath: ""}, wantHealthType: sidecar.HealthHTTP,
	}, {
		name:         "readiness group on a management port: the actuator's health there, and its port in metadata",
		pod:          []func(*corev1.Pod){managementPort, withProbe(intstr.FromString("management"), "/manage/health/readiness")},
		wantProtocol: sidecar.ProtocolHTTP, wantStatus: "http://10.0.0.7:8081/manage/info", wantHealth: "http://10.0.0.7:8081/manage/health",
		wantMeta:       map[string]string{sidecar.MetaManagementPort: "8081", sidecar.MetaManagementContextPath: "/manage"},
		wantHealthType: sidecar.HealthHTTP,
	}, {
		name:         "a probe outside the actuator stays the health check URL",
		pod:          []func(*corev1.Pod){withProbe(intstr.FromString("http"), "/ready")},
		wantProtocol: sidecar.ProtocolHTTP, wantStatus: "http://10.0.0.7:8080/actuator/info", wantHealth: "http://10.0.0.7:8080/ready",
		wantMeta: map[string]string{sidecar.MetaManagementPort: ""}, wantHealthType: sidecar.HealthHTTP,
	}, {
		name: "the syncer declares the management port and base path",
		pod:  []func(*corev1.Pod){managementPort},
		syncer: func(s *v1alpha1.EurekaSyncer) {
			port := intstr.FromString("management")
			s.Spec.Management = &v1alpha1.Management{Port: &port, BasePath: "/ops"}
		},
		wantProtocol: sidecar.ProtocolHTTP, wantStatus: "http://10.0.0.7:8081/ops/info", wantHealth: "http://10.0.0.7:8080/actuator/health",
		wantMeta:       map[string]string{sidecar.MetaManagementPort: "8081", sidecar.MetaManagementContextPath: "/ops"},
		wantHealthType: sidecar.HealthHTTP,
	}, {
		name:       "the pod's annotations win over the syncer",
		pod:        []func(*corev1.Pod){managementPort},
		syncer:     func(s *v1alpha1.EurekaSyncer) { s.Spec.Management = &v1alpha1.Management{BasePath: "/ops"} },
		annotation: map[string]string{v1alpha1.AnnotationManagementPort: "8081", v1alpha1.AnnotationManagementPath: "/"},
		// the registrar still probes the app's /actuator/health on 8080
		wantProtocol: sidecar.ProtocolHTTP, wantStatus: "http://10.0.0.7:8081/info", wantHealth: "http://10.0.0.7:8080/actuator/health",
		wantMeta:       map[string]string{sidecar.MetaManagementPort: "8081", sidecar.MetaManagementContextPath: "/"},
		wantHealthType: sidecar.HealthHTTP,
	}, {
		name:         "a gRPC port with a gRPC probe: TCP, no URLs, the probe's port checked by a connect",
		pod:          []func(*corev1.Pod){grpcOnly},
		syncer:       func(s *v1alpha1.EurekaSyncer) { s.Spec.Port = intstr.FromString("grpc") },
		wantProtocol: sidecar.ProtocolTCP, wantMeta: map[string]string{sidecar.MetaManagementPort: "", sidecar.MetaManagementContextPath: ""},
		wantHealthType: sidecar.HealthTCP, wantHealthPort: true,
	}, {
		name: "a port named tcp-… without a probe: TCP",
		pod: []func(*corev1.Pod){func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "tcp-ledger", ContainerPort: 7000}}
			p.Spec.Containers[0].ReadinessProbe = nil
		}},
		syncer:         func(s *v1alpha1.EurekaSyncer) { s.Spec.Port = intstr.FromString("tcp-ledger") },
		wantProtocol:   sidecar.ProtocolTCP,
		wantHealthType: sidecar.HealthTCP,
	}, {
		name:           "the annotation says TCP although the port is named http",
		annotation:     map[string]string{v1alpha1.AnnotationProtocol: "tcp"},
		wantProtocol:   sidecar.ProtocolTCP,
		wantHealthType: sidecar.HealthHTTP,
	}, {
		name:         "no zone in the syncer's metadata: the registrar reads the pod's zone label",
		syncer:       func(s *v1alpha1.EurekaSyncer) { s.Spec.Metadata = nil },
		wantProtocol: sidecar.ProtocolHTTP, wantStatus: "http://10.0.0.7:8080/actuator/info", wantHealth: "http://10.0.0.7:8080/actuator/health",
		wantHealthType: sidecar.HealthHTTP, wantZone: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := springPod()
			for _, f := range tc.pod {
				f(pod)
			}
			pod.Annotations = tc.annotation
			s := syncer("orders", time.Hour)
			if tc.syncer != nil {
				tc.syncer(&s)
			}
			r := Inject(pod, enabledNamespace(), []v1alpha1.EurekaSyncer{s}, testDefaults)
			if !r.Inject {
				t.Fatalf("not injected: %s %v", r.Reason, r.Err)
			}
			cfg := registrarConfig(t, r.Pod)
			inst := cfg.Instance(eureka.StatusUp)
			if cfg.Protocol != tc.wantProtocol {
				t.Errorf("protocol %q, want %q", cfg.Protocol, tc.wantProtocol)
			}
			if cfg.Health.Type != tc.wantHealthType {
				t.Errorf("health check %q, want %q", cfg.Health.Type, tc.wantHealthType)
			}
			if tc.wantHealthPort && cfg.Health.Port != 9090 {
				t.Errorf("health check on port %d, want the gRPC probe's 9090", cfg.Health.Port)
			}
			if inst.StatusPageURL != tc.wantStatus || inst.HealthCheckURL != tc.wantHealth {
				t.Errorf("status page %q and health check %q, want %q and %q", inst.StatusPageURL, inst.HealthCheckURL, tc.wantStatus, tc.wantHealth)
			}
			if tc.wantProtocol == sidecar.ProtocolTCP && inst.HomePageURL != "" {
				t.Errorf("a TCP instance has home page %q", inst.HomePageURL)
			}
			for k, want := range tc.wantMeta {
				if got, ok := inst.Metadata[k]; got != want || (want == "" && ok) {
					t.Errorf("metadata %s = %q (set: %v), want %q", k, got, ok, want)
				}
			}
			if got := cfg.ZoneFile != ""; got != tc.wantZone {
				t.Errorf("zone file %q, want one: %v", cfg.ZoneFile, tc.wantZone)
			}
			if tc.wantZone && !podInfoShowsZone(r.Pod) {
				t.Errorf("the podinfo volume does not show the zone label: %+v", r.Pod.Spec.Volumes)
			}
		})
	}
}

func podInfoShowsZone(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name != podInfoVolume || v.DownwardAPI == nil {
			continue
		}
		for _, item := range v.DownwardAPI.Items {
			if item.Path == zoneFileName && strings.Contains(item.FieldRef.FieldPath, corev1.LabelTopologyZone) {
				return true
			}
		}
	}
	return false
}
