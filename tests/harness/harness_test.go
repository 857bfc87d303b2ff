package harness_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/tests/harness"
)

func TestControlPlane_StartsAndAcceptsAPod(t *testing.T) {
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	if err := cp.Client.Create(ctx, pod); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	var got corev1.Pod
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatalf("read pod back: %v", err)
	}
	if got.UID == "" {
		t.Fatal("the API server gave the pod no UID")
	}
}

func TestEureka_TakenPortIsAClearError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = harness.StartEureka(context.Background(), harness.EurekaOptions{Port: port})
	if err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)+" is taken") {
		t.Fatalf("StartEureka on a taken port: %v, want an error saying the port is taken", err)
	}
}

func TestEureka_RestartComesBackEmptyOnTheSamePort(t *testing.T) {
	e := harness.EurekaT(t, harness.EurekaOptions{})
	before := e.URL()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if e.URL() != before {
		t.Fatalf("URL after restart = %s, want %s", e.URL(), before)
	}
}
