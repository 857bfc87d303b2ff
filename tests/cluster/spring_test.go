package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// A Spring Boot app's pods, its actuator on a management port of its own
// and its readiness probe on the actuator's readiness group, as Spring
// Boot's Kubernetes probes are set up: a real Spring Boot Admin server,
// discovering through Eureka, lists every pod UP with its health details,
// because each instance's health check URL is the actuator's health on
// that port and its metadata says where the actuator is.
func TestSpringBootAdmin_ListsEveryPodUpWithItsHealthDetails(t *testing.T) {
	story(t, 45*time.Second)
	app := cluster.App{Namespace: "admin", Name: "pricing", Replicas: 2, DrainSeconds: ptr.To[int32](2)}
	deploy(t, app, func(d *appsv1.Deployment) {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "MANAGEMENT_ADDR", Value: ":8081"})
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "management", ContainerPort: 8081})
		c.ReadinessProbe.HTTPGet = &corev1.HTTPGetAction{Path: "/actuator/health/readiness", Port: intstr.FromString("management")}
	})
	view := settle(t, app, 3*time.Minute)

	instances, err := c.Eureka.SpringRead(strings.ToUpper(app.Name))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range instances {
		wantHealth := fmt.Sprintf("http://%s:8081/actuator/health", in.IPAddr)
		if in.HealthCheckURL != wantHealth || in.StatusPageURL != fmt.Sprintf("http://%s:8081/actuator/info", in.IPAddr) ||
			in.Metadata[sidecar.MetaManagementPort] != "8081" || in.Metadata[sidecar.MetaManagementContextPath] != "/actuator" {
			t.Errorf("instance %s: health check %s, status page %s, metadata %v; want the actuator on 8081 (%s) and management.port 8081",
				in.InstanceID, in.HealthCheckURL, in.StatusPageURL, in.Metadata, wantHealth)
		}
	}

	admin, err := harness.StartSpringBootAdmin(context.Background(), harness.SpringBootAdminOptions{
		EurekaURL: c.Peers.DefaultZone(), CacheSeconds: clientCacheSeconds, StatusInterval: 2 * time.Second, LogDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Stop() })
	var listed []harness.AdminInstance
	harness.Eventually(t, 3*time.Minute, "Spring Boot Admin lists every pod UP with its health details", func() error {
		all, err := admin.Instances(context.Background())
		if err != nil {
			return err
		}
		listed = listed[:0]
		var pods []string
		for _, in := range all {
			if !strings.EqualFold(in.Name, app.Name) {
				continue
			}
			listed = append(listed, in)
			pod, _ := in.Details["pod"].(map[string]any)
			details, _ := pod["details"].(map[string]any)
			name, _ := details["name"].(string)
			if in.Status != "UP" || name == "" {
				return fmt.Errorf("%s is %s with details %v", in.HealthURL, in.Status, in.Details)
			}
			pods = append(pods, name)
		}
		slices.Sort(pods)
		if !slices.Equal(pods, view.ReadyPods) {
			return fmt.Errorf("lists the pods %v, want %v", pods, view.ReadyPods)
		}
		return nil
	})
	out, _ := json.MarshalIndent(listed, "", "  ")
	t.Logf("Spring Boot Admin's GET /instances for %s:\n%s", strings.ToUpper(app.Name), out)
}
