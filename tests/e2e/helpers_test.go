package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/sandbox"
)

// clientCacheSeconds is the Spring client's registry fetch interval and
// LoadBalancer cache TTL; drainSeconds outlasts them (see the package doc).
const (
	clientCacheSeconds = 2
	drainSeconds       = 10
)

func deploy(t *testing.T, app sandbox.App) {
	t.Helper()
	if err := sb.Deploy(context.Background(), app); err != nil {
		t.Fatal(err)
	}
}

// settle waits until Eureka lists exactly the app's ready pods and there
// are want of them, and returns how long that took.
func settle(t *testing.T, app sandbox.App, want int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	harness.Eventually(t, timeout, fmt.Sprintf("Eureka lists exactly the %d ready pods of %s", want, app.Name), func() error {
		v, err := sb.Look(context.Background(), app)
		if err != nil {
			return err
		}
		return v.Settled(want)
	})
	return time.Since(start)
}

func patchDeployment(t *testing.T, app sandbox.App, patch string) {
	t.Helper()
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace}}
	if err := sb.ControlPlane.Client.Patch(context.Background(), dep, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("patch deployment %s: %v", app.Name, err)
	}
}

func scale(t *testing.T, app sandbox.App, replicas int32) {
	patchDeployment(t, app, fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
}

// versionKey is the pod annotation that sets the instances' "version"
// metadata; changing it in the template rolls the Deployment.
const versionKey = "eurekube.io/metadata.version"

// rollout changes the pod template's version, which rolls every pod.
func rollout(t *testing.T, app sandbox.App, version string) {
	patchDeployment(t, app, fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, versionKey, version))
}

// waitRolledOut waits until every pod of the app (terminating ones
// included) is of version, and Eureka lists exactly the ready ones, each
// with that version in its metadata.
func waitRolledOut(t *testing.T, app sandbox.App, version string, timeout time.Duration) []string {
	t.Helper()
	var ready []string
	harness.Eventually(t, timeout, fmt.Sprintf("%s rolled out to version %s", app.Name, version), func() error {
		v, err := sb.Look(context.Background(), app)
		if err != nil {
			return err
		}
		for _, p := range v.Pods {
			if p.Annotations[versionKey] != version {
				return fmt.Errorf("pod %s is of version %q", p.Name, p.Annotations[versionKey])
			}
		}
		if err := v.Settled(int(app.Replicas)); err != nil {
			return err
		}
		instances, err := sb.Eureka.SpringRead(strings.ToUpper(app.Name))
		if err != nil {
			return err
		}
		for _, in := range instances {
			if in.Metadata["version"] != version {
				return fmt.Errorf("instance %s has version %q in Eureka", in.InstanceID, in.Metadata["version"])
			}
		}
		ready = v.ReadyPods
		return nil
	})
	return ready
}

func startClient(t *testing.T, service string) *harness.SpringClient {
	t.Helper()
	c, err := harness.StartSpringClient(context.Background(), harness.SpringClientOptions{
		EurekaURL: sb.Eureka.URL(), Service: service, CacheSeconds: clientCacheSeconds, LogDir: sb.LogDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// waitAnswered waits until every one of pods has answered the client since
// the reading since.
func waitAnswered(t *testing.T, c *harness.SpringClient, since harness.SpringStats, pods []string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("the Spring client called each of %v by name", pods), func() error {
		s, err := c.Stats(context.Background())
		if err != nil {
			return err
		}
		d := s.Since(since)
		for _, p := range pods {
			if d.ByInstance[p] == 0 {
				return fmt.Errorf("no call reached %s yet (answered: %v, failed %d)", p, d.ByInstance, d.Failed)
			}
		}
		return nil
	})
}

func stats(t *testing.T, c *harness.SpringClient) harness.SpringStats {
	t.Helper()
	s, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// leader is the manager replica that holds the reconciler's Lease, read
// from controller-runtime's leader_election_master_status metric.
func leader(t *testing.T) int {
	t.Helper()
	found := -1
	harness.Eventually(t, 30*time.Second, "one manager replica leads", func() error {
		found = -1
		for i, m := range sb.Eurekube.Managers {
			if m.Exited() {
				continue
			}
			if leads, err := isLeader(m.MetricsURL()); err != nil {
				return err
			} else if leads {
				found = i
			}
		}
		if found < 0 {
			return fmt.Errorf("no replica leads")
		}
		return nil
	})
	return found
}

func isLeader(metricsURL string) (bool, error) {
	resp, err := http.Get(metricsURL)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "leader_election_master_status{") && strings.HasSuffix(line, " 1") {
			return true, nil
		}
	}
	return false, sc.Err()
}
