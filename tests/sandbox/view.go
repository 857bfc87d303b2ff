package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// View is an app as Kubernetes and Eureka see it at one moment.
type View struct {
	// ReadyPods are the names of the pods that are Ready and not
	// terminating: the ones callers should reach.
	ReadyPods []string
	// Pods are all the app's pods, terminating ones included.
	Pods []corev1.Pod
	// UP are the pod names of the instances Eureka lists UP (from the
	// eurekube.io/pod metadata), as a Spring client reads them; Other are
	// its other instances as "instanceId status".
	UP    []string
	Other []string
}

// Look reads the app's pods and what Eureka lists for it.
func (s *Sandbox) Look(ctx context.Context, a App) (View, error) {
	return Look(ctx, s.ControlPlane.Client, s.Eureka, a)
}

// Look reads the app's pods through c and what e lists for it, wherever
// the app runs.
func Look(ctx context.Context, c client.Client, e *harness.Eureka, a App) (View, error) {
	var v View
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(a.Namespace), client.MatchingLabels{"app": a.Name}); err != nil {
		return v, fmt.Errorf("list pods of %s/%s: %w", a.Namespace, a.Name, err)
	}
	v.Pods = pods.Items
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			v.ReadyPods = append(v.ReadyPods, p.Name)
		}
	}
	instances, err := e.SpringRead(strings.ToUpper(a.Name))
	if err != nil {
		return v, err
	}
	for _, in := range instances {
		if in.Status == "UP" {
			v.UP = append(v.UP, in.Metadata[eureka.MetaPod])
		} else {
			v.Other = append(v.Other, in.InstanceID+" "+in.Status)
		}
	}
	slices.Sort(v.ReadyPods)
	slices.Sort(v.UP)
	return v, nil
}

// Settled reports whether Eureka lists exactly the ready pods UP and
// nothing else, and the Deployment has replicas ready pods.
func (v View) Settled(replicas int) error {
	switch {
	case len(v.ReadyPods) != replicas:
		return fmt.Errorf("%d ready pods %v, want %d", len(v.ReadyPods), v.ReadyPods, replicas)
	case !slices.Equal(v.UP, v.ReadyPods):
		return fmt.Errorf("the registry lists UP %v, ready pods are %v", v.UP, v.ReadyPods)
	case len(v.Other) > 0:
		return fmt.Errorf("the registry also lists %v", v.Other)
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
