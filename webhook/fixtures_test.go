package webhook

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
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

func syncer(name string, age time.Duration, labels map[string]string) v1alpha1.EurekaSyncer {
	return v1alpha1.EurekaSyncer{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop",
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age)),
		},
		Spec: v1alpha1.EurekaSyncerSpec{
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Port:     intstr.FromString("http"),
			Metadata: map[string]string{"zone": "zone-a"},
			Lease:    v1alpha1.Lease{RenewalIntervalSeconds: 30, DurationSeconds: 90},
		},
	}
}

func enabledNamespace() Namespace {
	return Namespace{Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}}
}

// springPod is webhooktest's Spring Boot pod, named as a ReplicaSet names
// it.
func springPod() *corev1.Pod { return webhooktest.SpringBootPod("shop", "orders-7d9f8-abcde") }
