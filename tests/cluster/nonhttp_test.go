package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// An app that speaks no HTTP (a gRPC server, say) on its only port: it
// registers without URLs and is UP only once its port accepts
// connections; until then its instance is listed, but not UP.
func TestNonHTTP_ATCPOnlyPodRegistersAndGatesOnItsPort(t *testing.T) {
	story(t, 25*time.Second)
	app := cluster.App{Namespace: "grpc", Name: "quotes", Replicas: 1, DrainSeconds: ptr.To[int32](2), Port: "grpc"}
	deploy(t, app, func(d *appsv1.Deployment) {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "LISTEN_PROTOCOL", Value: "tcp"}, corev1.EnvVar{Name: "LISTEN_ADDR", Value: ":9090"},
			corev1.EnvVar{Name: "LISTEN_AFTER", Value: "20s"})
		c.Ports = []corev1.ContainerPort{{Name: "grpc", ContainerPort: 9090}}
		c.ReadinessProbe.HTTPGet = nil
		c.ReadinessProbe.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromString("grpc")}
	})
	var seen []string
	harness.Eventually(t, 3*time.Minute, "the instance UP once its port accepts connections", func() error {
		instances, err := c.Eureka.SpringRead(strings.ToUpper(app.Name))
		if err != nil || len(instances) == 0 {
			return fmt.Errorf("not registered yet (%v)", err)
		}
		in := instances[0]
		if len(seen) == 0 || seen[len(seen)-1] != in.Status {
			seen = append(seen, in.Status)
		}
		if in.HomePageURL != "" || in.StatusPageURL != "" || in.HealthCheckURL != "" {
			t.Fatalf("a TCP instance registered with URLs: %q %q %q", in.HomePageURL, in.StatusPageURL, in.HealthCheckURL)
		}
		if in.Status != "UP" {
			return fmt.Errorf("%s", in.Status)
		}
		return nil
	})
	if len(seen) < 2 {
		t.Errorf("statuses seen %v: want the instance listed, not UP, before its port opened", seen)
	}
	t.Logf("statuses seen, each once: %v", seen)
	settle(t, app, time.Minute)
}
