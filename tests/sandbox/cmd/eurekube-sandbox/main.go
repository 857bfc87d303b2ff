// Command eurekube-sandbox is `make run`: Eurekube on this machine with real
// parts (see package sandbox) and a sample service, ORDERS, deployed as a
// team would: a labelled namespace, an EurekaSyncer and a Deployment of 3
// replicas. A real Spring Cloud client calls it by name so a rollout can be
// watched from the caller's side. It prints how to reach everything and
// runs until Ctrl-C, then stops every process it started.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "eurekube-sandbox: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet("eurekube-sandbox", pflag.ContinueOnError)
	dir := fs.String("dir", filepath.Join(root, ".sandbox"), "directory for the kubeconfig, binaries, certificates and logs (emptied at start)")
	eurekaPort := fs.Int("eureka-port", 8761, "port of the Eureka server and its dashboard on 127.0.0.1 (0 picks a free one)")
	replicas := fs.Int32("replicas", 3, "replicas of the sample Deployment")
	client := fs.Bool("spring-client", true, "run a Spring Cloud client that calls the sample service by name")
	exitWhenReady := fs.Bool("exit-when-ready", false, "stop everything once the sandbox is up (a smoke test of this command)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}

	log := logrus.New()
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.TimeOnly})
	// Ctrl-C during start-up stops what has started; a second one is not
	// needed (every child also dies with this process).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()

	sb, err := sandbox.Start(ctx, sandbox.Options{
		Dir:        *dir,
		EurekaPort: *eurekaPort,
		// Production timings: self-preservation on, 30 s response caches.
		EurekaProfile: harness.ProfileReal,
		Logger:        log,
	})
	if err != nil {
		return err
	}
	defer func() {
		log.Info("stopping every process")
		if err := sb.Stop(); err != nil {
			log.WithError(err).Warn("stop")
		}
		log.Info("stopped; nothing is left running")
	}()

	app := sandbox.App{Namespace: "shop", Name: "orders", Replicas: *replicas, Metadata: map[string]string{"zone": "zone-a"}}
	log.Info("deploying the sample service ORDERS: namespace shop, EurekaSyncer orders, Deployment orders")
	if err := sb.Deploy(ctx, app); err != nil {
		return err
	}
	log.Info("waiting until Eureka lists the ready pods and the syncer's status agrees (Eureka caches responses for up to 30 s)")
	if err := waitSettled(ctx, sb, app); err != nil {
		return err
	}
	var spring *harness.SpringClient
	if *client {
		log.Info("starting a Spring Cloud client that calls http://orders/ by name")
		spring, err = harness.StartSpringClient(ctx, harness.SpringClientOptions{
			EurekaURL: sb.Eureka.URL(), Service: app.Name, Interval: 100 * time.Millisecond, LogDir: sb.LogDir,
		})
		if err != nil {
			return err
		}
		defer func() { _ = spring.Stop() }()
	}
	printWelcome(sb, spring, time.Since(start))
	if *exitWhenReady {
		return nil
	}
	<-ctx.Done()
	fmt.Println()
	return nil
}

// waitSettled waits until Eureka lists exactly the sample's ready pods and
// the syncer's status says so too, so what the welcome suggests (kubectl get
// esync, the dashboard, the client's stats) agrees from the first look.
func waitSettled(ctx context.Context, sb *sandbox.Sandbox, app sandbox.App) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		v, err := sb.Look(ctx, app)
		if err == nil {
			err = v.Settled(int(app.Replicas))
		}
		if err == nil {
			err = syncerSettled(ctx, sb, app)
		}
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sample service did not settle (logs in %s): %w", sb.LogDir, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// syncerSettled reports whether the sample's EurekaSyncer status counts
// every replica registered and UP (READY n/n), and is Synced.
func syncerSettled(ctx context.Context, sb *sandbox.Sandbox, app sandbox.App) error {
	var s v1alpha1.EurekaSyncer
	if err := sb.ControlPlane.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: app.Name}, &s); err != nil {
		return fmt.Errorf("read EurekaSyncer %s/%s: %w", app.Namespace, app.Name, err)
	}
	st := s.Status
	ready := fmt.Sprintf("%d/%d", app.Replicas, app.Replicas)
	if st.RegisteredInstances != app.Replicas || st.Ready != ready || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced) {
		return fmt.Errorf("EurekaSyncer %s status: %d registered, READY %s, Synced %v; want %d, %s, true",
			app.Name, st.RegisteredInstances, st.Ready, meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced), app.Replicas, ready)
	}
	return nil
}

func printWelcome(sb *sandbox.Sandbox, spring *harness.SpringClient, took time.Duration) {
	eureka := "http://" + sb.Eureka.Addr()
	// The kubectl built beside the API server comes first on PATH, so the
	// commands below work on a machine without one.
	env := "export KUBECONFIG=" + sb.Kubeconfig
	kubectl, err := sb.ControlPlane.Kubectl()
	bundled := err == nil
	if bundled {
		env += " PATH=" + filepath.Dir(kubectl) + ":$PATH"
	}
	fmt.Printf(`
Eurekube sandbox is up (%s).

  kubectl            %s
                     kubectl -n shop get esync,deploy,pods
  Eureka dashboard   %s/
  Eureka registry    curl -s -H 'Accept: application/json' %s/eureka/apps/ORDERS
`, took.Round(time.Second), env, eureka, eureka)
	if !bundled {
		if _, err := exec.LookPath("kubectl"); err != nil {
			fmt.Println("                     (kubectl is not on this machine's PATH: any kubectl from v1.30 on works)")
		}
	}
	if spring != nil {
		fmt.Printf("  Spring client      curl -s %s   (calls http://orders/ by name every 100 ms)\n", spring.StatsURL())
	}
	fmt.Printf(`
  Try                kubectl -n shop rollout restart deploy/orders   (the client's "failed" stays 0)
                     kubectl -n shop scale deploy/orders --replicas 5
  Logs               %s

The Eureka server runs with production timings: its responses are cached
for up to 30 s, and old pods keep serving for 100 s after they leave Eureka.

Press Ctrl-C to stop everything.
`, sb.LogDir)
}
