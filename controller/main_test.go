package controller_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
)

const (
	clusterID = "cluster-under-test"
	resync    = 2 * time.Second
	// patience bounds every wait for the reconciler: a resync or two on a
	// quiet machine, far more on a busy one; how fast it is belongs to
	// make bench.
	patience = time.Minute
	// detachTimeout: a deleted syncer's finalizer waits this long for
	// Eureka once no pod runs its registrar (the default's two minutes
	// would make its test wait that long).
	detachTimeout = 10 * time.Second
	// claimGrace: an app's claim is kept this long whatever uses it (the
	// default's two minutes would make the sweeper's test wait that long).
	claimGrace = 5 * time.Second
	// patternAppGrace: an app that left Eureka keeps its pattern import
	// this long (the default's five minutes would make its test wait).
	patternAppGrace = 5 * time.Second
	// maxPatternApps caps a pattern import's apps (the default's 200
	// would make its test register that many).
	maxPatternApps = 3
	// maxServerSets caps the server sets the manager reads (the default's
	// 32 would make its test make that many); the suite's other tests use
	// a few.
	maxServerSets = 12
	// emptiedHold: how long an import keeps its endpoints when Eureka
	// lists none of its app's (the default's two minutes would make its
	// test wait that long).
	emptiedHold = 8 * time.Second
)

var (
	cp     *harness.ControlPlane
	mgr    ctrl.Manager
	server *harness.Eureka
	proxy  *harness.Proxy
	k8s    client.Client
)

// The suite's helpers are in helpers_test.go.

// TestMain starts a real API server, a real Eureka server (reached through
// a fault proxy) and the reconciler in a manager, as cmd/manager runs it;
// in -short mode (make unit) it starts nothing, the pure tests run and
// the others skip (needsServers).
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || harness.OnlyComputesRun() {
		os.Exit(m.Run())
	}
	os.Exit(func() int {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var err error
		if cp, err = harness.StartControlPlane(ctx, harness.ControlPlaneOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cp.Stop()
		if server, err = harness.StartEureka(ctx, harness.EurekaOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer server.Stop()
		if proxy, err = harness.StartProxy(server.Addr()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer proxy.Close()
		k8s = cp.Client
		// Many tests run the same app in namespaces of their own; the
		// ownership tests remove it for their run.
		if err := harness.ShareEveryApp(context.Background(), k8s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ctrl.SetLogger(logr.Discard())
		mgr, err = ctrl.NewManager(cp.Config, ctrl.Options{Scheme: cp.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
			Cache: controller.CacheOptions()}) // as the manager caches pods
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		log := logrus.New()
		log.SetOutput(io.Discard)
		if err := controller.Setup(mgr, controller.Options{
			ClusterID: clusterID, ResyncPeriod: resync, EurekaTimeout: time.Second, DetachTimeout: detachTimeout, ClaimGrace: claimGrace, PatternAppGrace: patternAppGrace, PatternCap: maxPatternApps, MaxServerSets: maxServerSets, ImportEmptiedHold: emptiedHold,
			Defaults: webhook.Defaults{EurekaURLs: []string{"http://" + proxy.Addr() + "/eureka"}, ClusterID: clusterID, Allowed: localEureka()}, Logger: log,
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		stopped := make(chan struct{})
		go func() { _ = mgr.Start(ctx); close(stopped) }()
		code := m.Run()
		cancel() // the manager stops before the servers it talks to
		<-stopped
		return code
	}())
}

// needsServers skips t in -short mode, where TestMain starts no server.
func needsServers(t testing.TB) {
	t.Helper()
	harness.SkipWhenShort(t, "a kube-apiserver, etcd and a Eureka server (a JVM)")
}
