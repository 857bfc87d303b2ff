package sandbox

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// App is a service as a team deploys it with Eurekube: a namespace
// labelled for injection, an EurekaSyncer and a Deployment whose pods serve
// HTTP on a container port named http, with a readiness probe. In the
// sandbox each pod's app container is the pod runner's testapp, which
// answers with its pod name.
type App struct {
	Namespace string
	// Name names the syncer and the Deployment and is the pods' app label;
	// Eureka lists the app upper-cased.
	Name     string
	Replicas int32
	// DrainSeconds is the syncer's preStop sleep; nil keeps the manager's
	// default (100 s).
	DrainSeconds *int32
	// Metadata goes into every instance's Eureka metadata.
	Metadata map[string]string
	// PreStop is the app container's own preStop hook (nil: none), which the
	// webhook composes with the drain.
	PreStop *corev1.LifecycleHandler
	// EurekaURLs are the syncer's Eureka servers (nil: the manager's
	// --eureka-url).
	EurekaURLs []string
}

// Objects are the namespace, the syncer and the Deployment.
func (a App) Objects() (*corev1.Namespace, *v1alpha1.EurekaSyncer, *appsv1.Deployment) {
	labels := map[string]string{"app": a.Name}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   a.Namespace,
		Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"},
	}}
	syncer := &v1alpha1.EurekaSyncer{
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace},
		Spec: v1alpha1.EurekaSyncerSpec{
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Port:     intstr.FromString("http"),
			Metadata: a.Metadata,
			Drain:    v1alpha1.Drain{PreStopSleepSeconds: a.DrainSeconds},
			Eureka:   v1alpha1.EurekaServers{ServiceURLs: a.EurekaURLs},
		},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(a.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// One new pod at a time, never fewer ready pods than asked for.
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					Containers: []corev1.Container{{
						Name:      "app",
						Image:     "eurekube/testapp:1",
						Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						Lifecycle: lifecycle(a.PreStop),
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
	return ns, syncer, dep
}

func lifecycle(preStop *corev1.LifecycleHandler) *corev1.Lifecycle {
	if preStop == nil {
		return nil
	}
	return &corev1.Lifecycle{PreStop: preStop}
}

// Deploy creates the app's objects; those that exist already are kept.
func (s *Sandbox) Deploy(ctx context.Context, a App) error {
	ns, syncer, dep := a.Objects()
	for _, obj := range []client.Object{ns, syncer, dep} {
		if err := s.ControlPlane.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("deploy %s/%s: create %T %s: %w", a.Namespace, a.Name, obj, obj.GetName(), err)
		}
	}
	return nil
}
