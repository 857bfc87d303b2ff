package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// One cluster for the suite: a node per machine, and starting one (node,
// cert-manager, Eureka, the manager's pods) is the slow part.
var c *cluster.Cluster

// TestMain starts the cluster, runs the suite, and fails it unless the
// teardown left the host exactly as it found it (processes, mounts,
// interfaces, routes, iptables rules, cgroups, sysctls, paths), having
// first checked that the listing sees what a running node changes, so that
// an empty difference means something.
//
// The tests that stop or kill manager replicas (or the node's kubelet, or
// a Eureka peer) run first, one at a time; the others, the stories (each in
// its own namespace, with its own Spring client), then run storySlots at a
// time, the longest first (story, in e2e_helpers_test.go). The stories'
// gate sets how many run at once, so Go's -parallel must not be lower.
func TestMain(m *testing.M) {
	harness.SkipSuiteWhenShort("a real node, cert-manager and a Eureka server")
	if !parallelSet() {
		_ = flag.Set("test.parallel", "64")
	}
	if reason := node.Unavailable(node.Options{}); reason != "" {
		fmt.Println("skipped: " + reason)
		os.Exit(0)
	}
	// The setup's logs in a directory of the suite's own, so a failed
	// start keeps them (harness.KeepSuiteSetup).
	logs, err := os.MkdirTemp("", "eurekube-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Minute)
	c, err = cluster.Start(ctx, cluster.Options{LogDir: logs, Node: node.Options{LogDir: filepath.Join(logs, "node")}})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the cluster:", err)
		if dir, err := harness.KeepSuiteSetup("cluster", logs); err == nil {
			fmt.Fprintln(os.Stderr, "the setup's logs (the node's processes, cert-manager, Eureka) are kept in", dir)
		}
		os.Exit(1)
	}
	before, _ := c.Node.HostListings()
	var problems []string
	during := before.Diff(node.ListHost(node.Options{}))
	for _, want := range []string{"processes", "mounts", "interfaces: " + node.BridgeName, "interfaces: " + node.DummyName, "routes", "rules", "cgroups", "sysctls", "paths"} {
		if !containsPrefix(during, "+ "+want) {
			problems = append(problems, "the listing of the running node shows no new "+want)
		}
	}
	code := m.Run()
	if err := callers.stop(); err != nil {
		problems = append(problems, fmt.Sprint("stop the stories' Spring client: ", err))
	}
	start := time.Now()
	if err := c.Stop(); err != nil {
		problems = append(problems, fmt.Sprint("stop the cluster: ", err))
	}
	fmt.Printf("cluster torn down in %s\n", time.Since(start).Round(time.Millisecond))
	if _, after := c.Node.HostListings(); after != nil {
		if diff := before.Diff(after); len(diff) > 0 {
			problems = append(problems, fmt.Sprintf("the node left the host changed:\n%s\nhost before the node:\n%s", strings.Join(diff, "\n"), before))
		}
	}
	if len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL:", strings.Join(problems, "\n"))
		code = 1
	}
	os.Exit(code)
}

// parallelSet says whether -test.parallel was given.
func parallelSet() bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	return set
}

func containsPrefix(lines []string, prefix string) bool {
	for _, line := range lines {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}
