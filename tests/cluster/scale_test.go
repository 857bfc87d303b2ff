package cluster_test

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/tests/cluster"
)

// Scaled up and down, Eureka lists exactly the pods that are ready and not
// terminating: each new pod once it is ready, each removed pod as soon as
// it starts to terminate.
func TestScale_EurekaListsExactlyTheReadyPods(t *testing.T) {
	story(t, 10*time.Second)
	app := cluster.App{Namespace: "reviews", Name: "reviews", Replicas: 3, DrainSeconds: ptr.To[int32](2)}
	start := time.Now()
	deploy(t, app, nil) // from 0 replicas to 3
	settle(t, app, 3*time.Minute)
	t.Logf("3 pods: Eureka listed exactly the ready pods %s after the app was deployed (its syncer reconciled first)", time.Since(start).Round(time.Millisecond))
	for _, n := range []int32{5, 2} {
		start := time.Now()
		scale(t, app, n)
		app.Replicas = n
		settle(t, app, 2*time.Minute)
		t.Logf("scaled to %d: Eureka listed exactly the ready pods %s after the scale", n, time.Since(start).Round(time.Millisecond))
	}
}
