package builders

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// AppLabel is the label key of an app's pods that its syncer selects.
const AppLabel = "app"

// SyncerOption changes a syncer that Syncer builds.
type SyncerOption func(*v1alpha1.EurekaSyncer)

// Syncer is the EurekaSyncer namespace/name registering, in Pod mode, the
// pods labelled app=<name> on their port named http: the pods Pod and
// Deployment build for app name. opts change it in order; a nil one is
// skipped.
func Syncer(namespace, name string, opts ...SyncerOption) *v1alpha1.EurekaSyncer {
	s := &v1alpha1.EurekaSyncer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.EurekaSyncerSpec{
			Selector: appSelector(name),
			Port:     intstr.FromString(PortName),
		},
	}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s
}

// Selecting makes the syncer register the pods labelled app=<app>.
func Selecting(app string) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Spec.Selector = appSelector(app) }
}

// Port is the container port the syncer registers, by number
// (intstr.FromInt32) or name (intstr.FromString); in Service mode the
// Service's port.
func Port(port intstr.IntOrString) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Spec.Port = port }
}

// AppName is the Eureka application name, in place of the syncer's name.
func AppName(name string) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Spec.AppName = name }
}

// EurekaURLs are the Eureka servers the syncer names, in place of the
// manager's --eureka-url.
func EurekaURLs(urls ...string) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Spec.Eureka.ServiceURLs = urls }
}

// RegistrarImage is the registrar image the syncer names
// (spec.sidecar.image), in place of the manager's --registrar-image.
func RegistrarImage(image string) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Spec.Sidecar.Image = image }
}

// Credentials names the Secret of the syncer's namespace holding the
// Eureka servers' username and password.
func Credentials(secret string) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) {
		s.Spec.Eureka.CredentialsSecretRef = &corev1.LocalObjectReference{Name: secret}
	}
}

// Traffic is the syncer's spec.traffic: Serve or Standby.
func Traffic(t v1alpha1.Traffic) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Spec.Traffic = t }
}

// Drain is the preStop sleep, in seconds, of the pods' app containers
// (0: none), in place of the manager's --default-drain.
func Drain(seconds int32) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Spec.Drain.PreStopSleepSeconds = &seconds }
}

// Metadata goes into every instance's Eureka metadata (a copy of m).
func Metadata(m map[string]string) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Spec.Metadata = maps.Clone(m) }
}

// HealthCheck is the check that decides UP and DOWN, in place of the app
// container's readinessProbe.
func HealthCheck(hc v1alpha1.HealthCheck) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Spec.HealthCheck = &hc }
}

// ServiceMode makes the syncer register the Service named service (Service
// mode): the Service's selector picks the pods, so the syncer's is
// cleared. Port is then the Service's port.
func ServiceMode(service string) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) {
		s.Spec.Mode, s.Spec.Service = v1alpha1.ModeService, &v1alpha1.ServiceTarget{Name: service}
		s.Spec.Selector = metav1.LabelSelector{}
	}
}

// CreatedAt is the syncer's creation time, as the API server would have
// set it: of two syncers selecting one pod, the older injects it.
func CreatedAt(at time.Time) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.CreationTimestamp = metav1.NewTime(at) }
}

// Conditions are the syncer's status conditions, as the reconciler would
// have written them.
func Conditions(conditions ...metav1.Condition) SyncerOption {
	return func(s *v1alpha1.EurekaSyncer) { s.Status.Conditions = conditions }
}

// appSelector selects the pods labelled app=<app>, in a map of its own.
func appSelector(app string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: app}}
}
