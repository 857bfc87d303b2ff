package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

func TestNode_RunsARestrictedPodBehindAServiceAndLeavesTheHostAsItFoundIt(t *testing.T) {
	if reason := node.Unavailable(node.Options{}); reason != "" {
		t.Skip("skipped: " + reason)
	}
	start := time.Now()
	n := node.StartT(t, node.Options{})
	t.Logf("node up in %s", time.Since(start).Round(time.Millisecond))
	before, _ := n.HostListings()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const preStopSleep = 3
	pod := restrictedPod(n.Image("testapp"), preStopSleep)
	if err := n.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "the pod Ready", func() error {
		if err := n.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("phase %s, conditions %v, containers %v", pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses)
	})
	if pod.Spec.NodeName != node.NodeName {
		t.Errorf("scheduled to %q, want %q", pod.Spec.NodeName, node.NodeName)
	}
	// The listing sees what a running node changes, so an empty diff after
	// the teardown means something.
	during := before.Diff(node.ListHost(node.Options{}))
	t.Logf("what the running node changed on the host:\n%s", strings.Join(during, "\n"))
	for _, want := range []string{"processes", "mounts", "interfaces: " + node.BridgeName, "interfaces: " + node.DummyName, "routes", "rules", "cgroups", "sysctls", "paths"} {
		if !containsPrefix(during, "+ "+want) {
			t.Errorf("the listing of the running node shows no new %s", want)
		}
	}
	url := "http://" + pod.Status.PodIP + ":8080/"
	if body, err := get(url); err != nil || strings.TrimSpace(body) != pod.Name {
		t.Fatalf("GET %s from the host: %q, %v; want the pod's name", url, body, err)
	}

	// kube-proxy routes a ClusterIP Service to it from the host.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "testapp"},
		Spec: corev1.ServiceSpec{
			Selector: pod.Labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if err := n.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	svcURL := "http://" + svc.Spec.ClusterIP + "/"
	harness.Eventually(t, time.Minute, "the Service answering from the host", func() error {
		body, err := get(svcURL)
		if err == nil && strings.TrimSpace(body) != pod.Name {
			return fmt.Errorf("GET %s: %q, want the pod's name", svcURL, body)
		}
		return err
	})

	// The app serves through its preStop sleep and stops after it.
	deleted := time.Now()
	if err := n.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var stopped time.Duration
	harness.Eventually(t, 30*time.Second, "the app to stop serving", func() error {
		if _, err := get(url); err == nil {
			return fmt.Errorf("still serving %s after the delete", time.Since(deleted).Round(time.Millisecond))
		}
		stopped = time.Since(deleted)
		return nil
	})
	t.Logf("the app stopped serving %s after the delete (preStop sleep %ds)", stopped.Round(time.Millisecond), preStopSleep)
	if stopped < preStopSleep*time.Second {
		t.Errorf("the app stopped %s after the delete, before its %d s preStop sleep ended", stopped, preStopSleep)
	}
	if limit := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second; stopped > limit {
		t.Errorf("the app stopped %s after the delete, after the %s grace period", stopped, limit)
	}
	harness.Eventually(t, time.Minute, "the pod gone", func() error {
		err := n.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})

	start = time.Now()
	if err := n.Teardown(); err != nil {
		t.Fatal(err)
	}
	t.Logf("node torn down in %s", time.Since(start).Round(time.Millisecond))
	_, after := n.HostListings()
	t.Logf("host before the node:\n%s", before)
	if diff := before.Diff(after); len(diff) > 0 {
		t.Errorf("the node left the host changed:\n%s\nafter:\n%s", strings.Join(diff, "\n"), after)
	}
}

// restrictedPod runs the test app as Pod Security "restricted" requires,
// with a preStop sleep.
func restrictedPod(image string, preStopSleep int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "testapp", Labels: map[string]string{"app": "testapp"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "app", Image: image, ImagePullPolicy: corev1.PullNever,
				Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"},
				}}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
					PeriodSeconds: 1,
				},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStopSleep}}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

func containsPrefix(lines []string, prefix string) bool {
	for _, line := range lines {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

func get(url string) (string, error) {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("status %s", resp.Status)
	}
	return string(body), err
}
