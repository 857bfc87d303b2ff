package controller

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// TestTrimPod_ChangesNothingTheReconcilerReads is the property the pod
// cache's transform must keep: whatever the pod, the reconciler reads the
// same from the trimmed copy as from the whole pod — its counts, the
// settings drift of its registrar, its registrar's failure — while the
// copy is smaller. The pods are generated: injected Spring Boot pods with
// random statuses, overrides and extra containers, and wholly random pods.
func TestTrimPod_ChangesNothingTheReconcilerReads(t *testing.T) {
	now := time.Now()
	fill := randfill.NewWithSeed(time.Now().UnixNano()).NilChance(0.3).NumElements(0, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
		},
		func(v *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*v = intstr.FromInt32(c.Int31n(65536))
			} else {
				*v = intstr.FromString([]string{"http", "grpc", "management", c.String(8)}[c.Intn(4)])
			}
		},
		func(t *metav1.Time, c randfill.Continue) {
			*t = metav1.NewTime(now.Add(-time.Duration(c.Int63n(int64(time.Hour)))))
		},
		func(t **metav1.Time, c randfill.Continue) {
			if c.Bool() {
				tt := metav1.NewTime(now)
				*t = &tt
			}
		},
	)
	then, current := springSyncer("http://a:8761/eureka"), springSyncer("http://b:8761/eureka")
	current.Spec.HealthCheck = &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckTCP, PeriodSeconds: 7}
	overrides := [][]string{nil, {v1alpha1.AnnotationAppName, "billing"}, {v1alpha1.AnnotationHealthPath, "/ready"}, {v1alpha1.AnnotationManagementPort, "http"}}

	failing := 0
	for i := range 400 {
		var pod corev1.Pod
		if i%4 != 3 {
			pod = injected(t, fmt.Sprintf("orders-%d", i), then, overrides[i%len(overrides)]...)
			fill.Fill(&pod.Status)
			// The registrar's own status, in a random state, among the
			// random ones.
			var registrar corev1.ContainerStatus
			fill.Fill(&registrar)
			registrar.Name = v1alpha1.RegistrarContainerName
			if c := []int32{0, 1, 2}[i%3]; registrar.State.Terminated != nil {
				registrar.State.Terminated.ExitCode = c
			}
			if registrar.LastTerminationState.Terminated != nil {
				registrar.LastTerminationState.Terminated.ExitCode = 1
			}
			if registrar.State.Waiting != nil && i%5 == 0 {
				registrar.State.Waiting.Reason = "ImagePullBackOff"
			}
			pod.Status.ContainerStatuses = append([]corev1.ContainerStatus{registrar}, pod.Status.ContainerStatuses...)
			if i%3 == 0 {
				pod.Status.Phase = corev1.PodRunning
			}
			var extra corev1.Container
			fill.Fill(&extra)
			pod.Spec.Containers = append(pod.Spec.Containers, extra)
			fill.Fill(&pod.Spec.Volumes)
		} else {
			fill.Fill(&pod)
		}
		got, err := TrimPod(pod.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		trimmed := got.(*corev1.Pod)
		for _, s := range []*namedSyncer{{"the spec it was injected from", then}, {"a changed spec", current}} {
			if a, b := specDrift(&pod, s.syncer, driftDefaults), specDrift(trimmed, s.syncer, driftDefaults); a != b {
				t.Fatalf("pod %d, %s: drift %q of the whole pod, %q of the trimmed one", i, s.name, a, b)
			}
			a := countPods([]corev1.Pod{pod}, s.syncer, driftDefaults, nil, now)
			b := countPods([]corev1.Pod{*trimmed}, s.syncer, driftDefaults, nil, now)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("pod %d, %s: counts %+v of the whole pod, %+v of the trimmed one", i, s.name, a, b)
			}
		}
		wa, fa := registrarFailureOf(&pod, now)
		wb, fb := registrarFailureOf(trimmed, now)
		failing += map[bool]int{true: 1}[fa]
		if wa != wb || fa != fb {
			t.Fatalf("pod %d: registrar failure %q %v of the whole pod, %q %v of the trimmed one", i, wa, fa, wb, fb)
		}
		if live(&pod) != live(trimmed) || finished(&pod) != finished(trimmed) || podReady(&pod) != podReady(trimmed) ||
			pod.Spec.NodeName != trimmed.Spec.NodeName || pod.UID != trimmed.UID || !reflect.DeepEqual(pod.Annotations, trimmed.Annotations) || !reflect.DeepEqual(pod.Labels, trimmed.Labels) {
			t.Fatalf("pod %d: the trimmed pod reads otherwise: %+v", i, trimmed)
		}
		if trimmed.Size() > pod.Size() {
			t.Fatalf("pod %d: trimmed to %d bytes from %d", i, trimmed.Size(), pod.Size())
		}
	}
	if failing == 0 {
		t.Fatal("no generated pod had a failing registrar: the property was not tried on one")
	}
}

// namedSyncer is a syncer and what it stands for in a test.
type namedSyncer struct {
	name   string
	syncer *v1alpha1.EurekaSyncer
}

func TestTrimPod_LeavesOtherObjectsAlone(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if got, err := TrimPod(node); err != nil || got != node {
		t.Fatalf("TrimPod(node) = %v, %v; want the node itself", got, err)
	}
}
