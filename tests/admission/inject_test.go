package admission

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
)

func TestInject_OptedInPodMatchingASyncerComesBackInjected(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	ns := optedInNamespace(ctx, t, "inject")
	if err := suite.c.Create(ctx, builders.Syncer(ns, "orders")); err != nil {
		t.Fatal(err)
	}
	pod := builders.Pod(ns, "orders", builders.Restricted())
	if err := suite.c.Create(ctx, pod); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	// Read back what the API server stored, not what the create returned.
	var got corev1.Pod
	if err := suite.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}

	reg := registrar(&got)
	if reg == nil {
		t.Fatalf("no %s container; containers: %v", eurekubev1alpha1.RegistrarContainerName, containerNames(&got))
	}
	if reg.Image != registrarImage {
		t.Errorf("registrar image = %q, want the manager's --registrar-image %q", reg.Image, registrarImage)
	}
	env := map[string]string{}
	for _, e := range reg.Env {
		env[e.Name] = e.Value
	}
	if got := env["EUREKUBE_EUREKA_URLS"]; got != defaultEureka {
		t.Errorf("EUREKUBE_EUREKA_URLS = %q, want the manager's --eureka-url %q (the syncer names none)", got, defaultEureka)
	}
	var kubeSystem corev1.Namespace
	if err := suite.c.Get(ctx, client.ObjectKey{Name: "kube-system"}, &kubeSystem); err != nil {
		t.Fatal(err)
	}
	if got := env["EUREKUBE_CLUSTER_ID"]; got != string(kubeSystem.UID) {
		t.Errorf("EUREKUBE_CLUSTER_ID = %q, want the UID of kube-system %q (no --cluster-id given)", got, kubeSystem.UID)
	}

	app := got.Spec.Containers[0]
	if app.Lifecycle == nil || app.Lifecycle.PreStop == nil {
		t.Fatal("the app container has no preStop: it would stop serving while clients still call it")
	}
	switch ps := app.Lifecycle.PreStop; {
	case ps.Sleep != nil:
		if ps.Sleep.Seconds != defaultDrain {
			t.Errorf("preStop sleeps %d s, want the default drain %d s", ps.Sleep.Seconds, defaultDrain)
		}
	default:
		t.Errorf("preStop = %+v, want the sleep action (no --exec-sleep-fallback)", ps)
	}
	if g := got.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30+defaultDrain {
		t.Errorf("terminationGracePeriodSeconds = %v, want %d (the default 30 s plus the drain)", deref(g), 30+defaultDrain)
	}
	if a := got.Annotations[eurekubev1alpha1.StatusAnnotation]; a != eurekubev1alpha1.StatusInjected {
		t.Errorf("annotation %s = %q, want %q", eurekubev1alpha1.StatusAnnotation, a, eurekubev1alpha1.StatusInjected)
	}
	if a := got.Annotations[eurekubev1alpha1.SyncerAnnotation]; a != "orders" {
		t.Errorf("annotation %s = %q, want the syncer's name", eurekubev1alpha1.SyncerAnnotation, a)
	}
}

// A Job's pod selected by a syncer is not injected (the registrar would keep
// it running forever) and says so on itself, where the reconciler reads it.
func TestInject_PodsMeantToFinishAreSkippedAndSaySo(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	ns := optedInNamespace(ctx, t, "job")
	createSyncer(t, builders.Syncer(ns, "orders"))
	pod := builders.Pod(ns, "orders", builders.Restricted())
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	if err := suite.c.Create(ctx, pod); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	var got corev1.Pod
	if err := suite.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if eurekubev1alpha1.RunsRegistrar(&got) {
		t.Fatal("a pod with restartPolicy OnFailure got the registrar: it would never complete")
	}
	a := got.Annotations
	adaptations, err := eurekubev1alpha1.DecodeAdaptations(a[eurekubev1alpha1.AdaptationsAnnotation])
	if a[eurekubev1alpha1.StatusAnnotation] != eurekubev1alpha1.StatusSkipped || a[eurekubev1alpha1.SyncerAnnotation] != "orders" ||
		err != nil || len(adaptations) != 1 || adaptations[0].Reason != eurekubev1alpha1.AdaptationMeantToFinish {
		t.Fatalf("annotations = %v (%v), want status skipped, syncer orders and the PodMeantToFinish adaptation", a, err)
	}
}

func TestInject_LeavesPodsAloneThatAreNotOptedIn(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	cases := []struct {
		name string
		// setup returns the namespace to create the pod in and may change
		// the pod.
		setup func(t *testing.T, pod *corev1.Pod) string
	}{
		{"namespace without the injection label", func(t *testing.T, _ *corev1.Pod) string {
			ns := namespace(ctx, t, "plain", nil)
			createSyncer(t, builders.Syncer(ns, "orders"))
			return ns
		}},
		{"pod labelled eurekube.io/inject=false", func(t *testing.T, pod *corev1.Pod) string {
			ns := optedInNamespace(ctx, t, "opt-out")
			createSyncer(t, builders.Syncer(ns, "orders"))
			pod.Labels[eurekubev1alpha1.InjectLabel] = "false"
			return ns
		}},
		{"no syncer selects the pod", func(t *testing.T, _ *corev1.Pod) string {
			ns := optedInNamespace(ctx, t, "unmatched")
			createSyncer(t, builders.Syncer(ns, "payments"))
			return ns
		}},
		{"the manager's own namespace, even when labelled", func(t *testing.T, _ *corev1.Pod) string {
			ensureNamespace(t, managerNamespace, map[string]string{eurekubev1alpha1.NamespaceInjectionLabel: "enabled"})
			createSyncer(t, builders.Syncer(managerNamespace, "orders", func(s *eurekubev1alpha1.EurekaSyncer) { s.GenerateName, s.Name = "orders-", "" }))
			return managerNamespace
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := builders.Pod("", "orders", builders.Restricted())
			pod.Namespace = tc.setup(t, pod)
			want := pod.DeepCopy()
			if err := suite.c.Create(ctx, pod); err != nil {
				t.Fatalf("create pod: %v", err)
			}
			var got corev1.Pod
			if err := suite.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
				t.Fatal(err)
			}
			if reg := registrar(&got); reg != nil {
				t.Errorf("the pod was injected; containers: %v", containerNames(&got))
			}
			if len(got.Spec.Containers) != len(want.Spec.Containers) {
				t.Errorf("containers = %v, want only the app's", containerNames(&got))
			}
			if got.Spec.Containers[0].Lifecycle != nil {
				t.Errorf("the app container got a lifecycle: %+v", got.Spec.Containers[0].Lifecycle)
			}
			if g := deref(got.Spec.TerminationGracePeriodSeconds); g != 30 {
				t.Errorf("terminationGracePeriodSeconds = %d, want the API server's default 30", g)
			}
			for k := range got.Annotations {
				if strings.HasPrefix(k, eurekubev1alpha1.AnnotationPrefix) {
					t.Errorf("the pod got annotation %s=%s", k, got.Annotations[k])
				}
			}
		})
	}
}

func TestInject_DeniesAPodWithAnInvalidAnnotation(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	ns := optedInNamespace(ctx, t, "deny")
	createSyncer(t, builders.Syncer(ns, "orders"))
	cases := []struct {
		annotation, value string
		// allowed is part of the message that says what is allowed.
		allowed string
	}{
		{eurekubev1alpha1.AnnotationPreStopSleep, "forever", "0 to 3600"},
		{eurekubev1alpha1.AnnotationPort, "70000", "1 to 65535"},
		{eurekubev1alpha1.AnnotationSidecarMemory, "lots", "quantity"},
		{eurekubev1alpha1.AnnotationPrefix + "app-nmae", "orders", "known: "},
	}
	for _, tc := range cases {
		t.Run(tc.annotation+"="+tc.value, func(t *testing.T) {
			pod := builders.Pod(ns, "orders", builders.Restricted())
			pod.Annotations = map[string]string{tc.annotation: tc.value}
			err := suite.c.Create(ctx, pod)
			if err == nil {
				t.Fatalf("the pod was admitted with %s=%q", tc.annotation, tc.value)
			}
			msg := err.Error()
			for _, want := range []string{tc.annotation, `"` + tc.value + `"`, tc.allowed} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not mention %q: %s", want, msg)
				}
			}
		})
	}
}
