package cluster_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/eurekube/eurekube/tests/cluster"
)

// One cluster for the suite: a node per machine, and starting one (node,
// cert-manager, Eureka, the manager's pods) is the slow part.
var c *cluster.Cluster

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("skipped: the real node needs root (it mounts, creates interfaces and iptables rules, and runs containerd)")
		os.Exit(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	var err error
	c, err = cluster.Start(ctx, cluster.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the cluster:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
