package webhook

import (
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
