package webhook

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/webhook/webhooktest"
)

// Small builders for test fixtures (cert-manager style).

var testDefaults = Defaults{
	RegistrarImage:      "eurekube/registrar:test",
	EurekaURLs:          []string{"http://eureka:8761/eureka"},
	PreStopSleepSeconds: 100,
	ClusterID:           "cluster-uid-1",
	RegistrarPort:       9901,
	RegistrarLogLevel:   "info",
	RegistrarResources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
	},
}

// syncer is the syncer name of namespace shop selecting the Spring pod
// (app=orders), created age before 2026-01-01, with a zone in its
// metadata and the lease the API server defaults, changed by opts.
func syncer(name string, age time.Duration, opts ...builders.SyncerOption) v1alpha1.EurekaSyncer {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age)
	s := builders.Syncer("shop", name, append([]builders.SyncerOption{
		builders.Selecting("orders"), builders.CreatedAt(created), builders.Metadata(map[string]string{"zone": "zone-a"}),
		func(s *v1alpha1.EurekaSyncer) {
			s.Spec.Lease = v1alpha1.Lease{RenewalIntervalSeconds: 30, DurationSeconds: 90}
		},
	}, opts...)...)
	return *s
}

func enabledNamespace() Namespace {
	return Namespace{Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}}
}

// springPod is webhooktest's Spring Boot pod, named as a ReplicaSet names
// it.
func springPod() *corev1.Pod { return webhooktest.SpringBootPod("shop", "orders-7d9f8-abcde") }

// inject runs what the handler runs, without I/O.
func inject(t *testing.T, pod *corev1.Pod, syncers ...v1alpha1.EurekaSyncer) *corev1.Pod {
	t.Helper()
	r := Inject(pod, enabledNamespace(), syncers, testDefaults)
	if r.Denied != "" {
		t.Fatal(r.Denied)
	}
	return r.Pod
}

func withPreStop(hook *corev1.LifecycleHandler) func() *corev1.Pod {
	return func() *corev1.Pod {
		p := springPod()
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: hook}
		return p
	}
}

func hasVolume(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}
