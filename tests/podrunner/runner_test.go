package podrunner_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/podrunner"
)

func startRunner(t *testing.T) *harness.ControlPlane {
	t.Helper()
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{})
	dir := t.TempDir()
	app, err := harness.BuildBinary("./tests/podrunner/testapp", dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := harness.BuildBinary("./cmd/registrar", dir)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	r, err := podrunner.New(podrunner.Options{Config: cp.Config, RegistrarBin: reg, AppBin: app, LogDir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return cp
}

func servingPod(name string, preStopSleep int64) *corev1.Pod {
	grace := int64(10)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "app", Image: "app:1",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStopSleep}}},
			}},
		},
	}
}

func get(url string) (string, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

func TestRunner_RunsAPodOnItsOwnLoopbackIPAndReportsItReady(t *testing.T) {
	cp := startRunner(t)
	ctx := context.Background()
	for _, name := range []string{"web-1", "web-2"} {
		if err := cp.Client.Create(ctx, servingPod(name, 0)); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	for _, name := range []string{"web-1", "web-2"} {
		harness.Eventually(t, 20*time.Second, name+" ready", func() error {
			var pod corev1.Pod
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &pod); err != nil {
				return err
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && strings.HasPrefix(pod.Status.PodIP, "127.0.") {
					ips[name] = pod.Status.PodIP
					return nil
				}
			}
			return fmt.Errorf("not ready: %+v", pod.Status)
		})
		body, err := get("http://" + ips[name] + ":8080/")
		if err != nil || body != name {
			t.Fatalf("GET %s:8080 = %q, %v; want the pod name %s", ips[name], body, err, name)
		}
	}
	if ips["web-1"] == ips["web-2"] {
		t.Fatalf("both pods got %s", ips["web-1"])
	}
}

func TestRunner_KeepsServingThroughThePreStopSleepThenRemovesThePod(t *testing.T) {
	cp := startRunner(t)
	ctx := context.Background()
	pod := servingPod("drain", 2)
	if err := cp.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var ip string
	harness.Eventually(t, 20*time.Second, "pod serving", func() error {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		ip = pod.Status.PodIP
		_, err := get("http://" + ip + ":8080/")
		return err
	})
	if err := cp.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// During the 2 s preStop sleep the app has not had SIGTERM: it serves.
	for time.Since(deleted) < 1500*time.Millisecond {
		if _, err := get("http://" + ip + ":8080/"); err != nil {
			t.Fatalf("app stopped serving %s after deletion, inside its preStop sleep: %v", time.Since(deleted), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	harness.Eventually(t, 10*time.Second, "pod removed after SIGTERM", func() error {
		err := cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	if _, err := get("http://" + ip + ":8080/"); err == nil {
		t.Fatal("app still serving after its pod was removed")
	}
}
