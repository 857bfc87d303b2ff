package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/webhook"
)

// Pure unit tests of what the reconciler reads from the registrars' pods:
// the settings they were injected with, and their failures.

func TestSpecDrift_NamesWhatAPodWasGivenAndWhatTheSpecGivesNow(t *testing.T) {
	before := springSyncer("http://a:8761/eureka")
	pod := injected(t, "orders-1", before)
	if got := specDrift(&pod, before, driftDefaults); got != "" {
		t.Errorf("the spec the pod was injected from: drift %q, want none", got)
	}

	if got, want := specDrift(&pod, springSyncer("http://b:8761/eureka"), driftDefaults),
		"EUREKUBE_EUREKA_URLS: http://a:8761/eureka → http://b:8761/eureka"; got != want {
		t.Errorf("other URLs: drift %q, want %q", got, want)
	}

	tcp := springSyncer("http://a:8761/eureka")
	tcp.Spec.AppName = "orders-v2"
	tcp.Spec.HealthCheck = &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckTCP, PeriodSeconds: 7}
	got := specDrift(&pod, tcp, driftDefaults)
	for _, want := range []string{"EUREKUBE_APP_NAME: ORDERS → ORDERS-V2", "EUREKUBE_HEALTH_TYPE: http → tcp", "EUREKUBE_HEALTH_PATH: /actuator/health → (none)",
		"EUREKUBE_HEALTH_PERIOD: 5s → 7s"} {
		if !strings.Contains(got, want) {
			t.Errorf("another app name and health check: drift %q, want it to name %q", got, want)
		}
	}

	// What the pod's annotations chose is what the spec gives it now.
	overridden := injected(t, "orders-2", before, v1alpha1.AnnotationAppName, "billing")
	if got := specDrift(&overridden, before, driftDefaults); got != "" {
		t.Errorf("a pod whose annotation names the app: drift %q, want none", got)
	}

	// Nothing known, nothing claimed.
	bare := podFixture("orders-3", true, true, injectedBy("orders", "100")...)
	if got := specDrift(&bare, tcp, driftDefaults); got != "" {
		t.Errorf("a registrar without settings in its environment: drift %q, want none", got)
	}
	noServer := springSyncer()
	if got := specDrift(&pod, noServer, webhook.Defaults{}); got != "" {
		t.Errorf("a spec the webhook would refuse now: drift %q, want none", got)
	}
}

func TestCountPods_NamesThePodsInjectedFromAnOlderSpecWithTheOutdatedOnes(t *testing.T) {
	before, now := springSyncer("http://a:8761/eureka"), springSyncer("http://b:8761/eureka")
	onOlderImage := injected(t, "orders-4", now)
	onOlderImage.Annotations[v1alpha1.RegistrarImageAnnotation] = "eurekube/registrar:1.0"
	both := injected(t, "orders-3", before)
	both.Annotations[v1alpha1.RegistrarImageAnnotation] = "eurekube/registrar:1.0"
	pods := []corev1.Pod{injected(t, "orders-2", before), injected(t, "orders-1", before), both, onOlderImage, injected(t, "orders-5", now)}

	c := countPods(pods, now, driftDefaults, nil, time.Now())
	if got := strings.Join(c.outdated, ","); got != "orders-1,orders-2,orders-3,orders-4" {
		t.Errorf("outdated %q, want orders-1 to orders-4, each once", got)
	}
	st, _ := nextStatus(now, &observed{pods: c}, metav1.Now())
	if st.OutdatedRegistrarPods != 4 {
		t.Errorf("outdatedRegistrarPods %d, want 4", st.OutdatedRegistrarPods)
	}
	cond := registrarCurrent(now, &observed{pods: c})
	for _, want := range []string{"3 pod(s) injected from an older spec (EUREKUBE_EUREKA_URLS: http://a:8761/eureka → http://b:8761/eureka): orders-1, orders-2, orders-3",
		"2 injected pod(s) run an older registrar image", "orders-3, orders-4", "kubectl rollout restart"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("RegistrarCurrent message %q, want it to say %q", cond.Message, want)
		}
	}
	if cond.Status != metav1.ConditionFalse || cond.Reason != reasonRegistrarOutdated {
		t.Errorf("RegistrarCurrent %s %s, want False OutdatedRegistrar (an image is older)", cond.Status, cond.Reason)
	}

	specOnly := registrarCurrent(now, &observed{pods: countPods(pods[:2], now, driftDefaults, nil, time.Now())})
	if specOnly.Status != metav1.ConditionFalse || specOnly.Reason != reasonSpecOutdated || !strings.Contains(specOnly.Message, "2 pod(s) injected from an older spec") {
		t.Errorf("RegistrarCurrent %s %s %q, want False OutdatedSpec naming the 2 pods", specOnly.Status, specOnly.Reason, specOnly.Message)
	}
}

const badConfig = "registrar: bad configuration: EUREKUBE_HEALTH_TIMEOUT=\"10s\": must not exceed EUREKUBE_HEALTH_PERIOD (5s)"

func TestRegistrarFailureOf_QuotesTheRegistrarsLastWords(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	exited := &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "time=\"…\" level=info msg=starting\n" + badConfig + "\n"}
	pod := podFixture("orders-1", true, true, injectedBy("orders", "100")...)
	cases := []struct {
		name  string
		state corev1.ContainerStatus
		want  string // "": not failing
	}{
		{"running", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, ""},
		{"crash loop", corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: exited}}, badConfig},
		{"exited and not restarted", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: exited}}, badConfig},
		{"exited cleanly", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}, ""},
		{"killed for memory", corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}, "OOMKilled (exit code 137)"},
		{"silent", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}, "exited with code 1"},
		{"cannot pull its image", corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
			Message: "Back-off pulling image \"eurekube/registrar:typo\""}}}, "Back-off pulling image \"eurekube/registrar:typo\""},
		{"starting", corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}, ""},
		{"running moments after a crash", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-time.Minute))}},
			LastTerminationState: corev1.ContainerState{Terminated: exited}}, badConfig},
		{"running long after a crash", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-crashLoopWindow))}},
			LastTerminationState: corev1.ContainerState{Terminated: exited}}, ""},
		{"long last words", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error",
			Message: strings.Repeat("x", 5000)}}}, strings.Repeat("x", maxLastWords) + "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := withRegistrarStatus(pod, tc.state)
			words, failing := registrarFailureOf(&p, now)
			if failing != (tc.want != "") || words != tc.want {
				t.Errorf("registrarFailureOf = %q, %v; want %q", words, failing, tc.want)
			}
		})
	}
	app := pod
	app.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Terminated: exited}}}
	if words, failing := registrarFailureOf(&app, now); failing {
		t.Errorf("the app container's exit counted as the registrar's: %q", words)
	}
}

func TestRegistrarHealthy_NamesThreePodsAndSyncedSaysTheSame(t *testing.T) {
	crashing := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: badConfig}}}
	oom := crashing
	oom.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	var pods []corev1.Pod
	for _, name := range []string{"orders-1", "orders-2", "orders-4", "orders-5"} {
		pods = append(pods, withRegistrarStatus(podFixture(name, true, false, injectedBy("orders", "100")...), crashing))
	}
	pods = append(pods, withRegistrarStatus(podFixture("orders-3", true, false, injectedBy("orders", "100")...), oom),
		podFixture("orders-6", true, true, injectedBy("orders", "100")...))
	s := syncerFixture()
	obs := &observed{pods: count(pods, "")}

	healthy := registrarHealthy(s, obs)
	want := "5 pod(s): " + badConfig + " (shop/orders-1, shop/orders-2 and 2 more); OOMKilled (exit code 137) (shop/orders-3)"
	if healthy.Status != metav1.ConditionFalse || healthy.Reason != reasonRegistrarFailing || !strings.HasPrefix(healthy.Message, want) {
		t.Errorf("RegistrarHealthy %s %s %q, want False RegistrarFailing starting %q", healthy.Status, healthy.Reason, healthy.Message, want)
	}
	st, _ := nextStatus(s, obs, metav1.Now())
	for _, c := range st.Conditions {
		if c.Type == v1alpha1.ConditionSynced && (c.Reason != reasonRegistrarFailing || !strings.Contains(c.Message, want) || !strings.Contains(c.Message, "no instance is UP")) {
			t.Errorf("Synced %s %q, want RegistrarFailing quoting %q", c.Reason, c.Message, want)
		}
	}

	// One pod's instance is UP: Synced still explains the missing ones.
	obs.instances = instancesFixture(eureka.StatusUp)
	obs.pods.ready = 3
	st, _ = nextStatus(s, obs, metav1.Now())
	for _, c := range st.Conditions {
		if c.Type == v1alpha1.ConditionSynced && c.Reason != reasonRegistrarFailing {
			t.Errorf("Synced %s %q with 1 of 3 ready pods UP, want RegistrarFailing", c.Reason, c.Message)
		}
	}

	if got := failingMessage("shop", []registrarFailure{{"a", "x"}, {"b", "y"}, {"c", "z"}, {"d", "w"}, {"e", "w"}}); got != "5 pod(s): x (shop/a); y (shop/b); z (shop/c); and 2 more pod(s)" {
		t.Errorf("failingMessage = %q", got)
	}
}
