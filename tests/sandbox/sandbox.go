// Package sandbox runs Eurekube on one machine with real parts only: a
// kube-apiserver with etcd and a kube-controller-manager (so Deployments
// roll for real), a Spring Cloud Netflix Eureka server, manager replicas
// serving the webhook over TLS with a bootstrapped certificate, and the pod
// runner playing the kubelet — pods run as processes on their own loopback
// IPs, the injected registrar as the real cmd/registrar binary.
//
// `make run` starts one with a sample app (tests/sandbox/cmd/eurekube-sandbox).
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/podrunner"
)

// Options configure Start.
type Options struct {
	// Dir receives the binaries, certificates, kubeconfig and every log.
	Dir string
	// EurekaPort on 127.0.0.1; 0 picks a free one.
	EurekaPort int
	// EurekaProfile is harness.ProfileFast (default) or harness.ProfileReal.
	EurekaProfile string
	// ManagerReplicas (default 2): they elect a leader for the reconciler
	// and all serve the webhook behind one Service.
	ManagerReplicas int
	// ResyncPeriod of the reconciler (default 10 s).
	ResyncPeriod time.Duration
	// Logger receives the sandbox's own progress and the pod runner's log.
	Logger logrus.FieldLogger
}

// Sandbox is a running local cluster with Eurekube installed.
type Sandbox struct {
	ControlPlane      *harness.ControlPlane
	ControllerManager *harness.Process
	Eureka            *harness.Eureka
	Eurekube          *harness.Eurekube
	Runner            *podrunner.Runner
	// Kubeconfig is a copy of the administrator's kubeconfig in Dir.
	Kubeconfig string
	// LogDir holds every process's log (pods: <ns>_<pod>_<container>.log).
	LogDir string

	opts       Options
	stopRunner context.CancelFunc
	runnerDone chan error
}

// Start brings every part up in dependency order. On error it stops what
// it started, so nothing is left running.
func Start(ctx context.Context, o Options) (sb *Sandbox, err error) {
	if o.Dir == "" {
		return nil, errors.New("sandbox: Options needs a Dir")
	}
	if o.ManagerReplicas == 0 {
		o.ManagerReplicas = 2
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = 10 * time.Second
	}
	if o.Logger == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		o.Logger = l
	}
	s := &Sandbox{opts: o, LogDir: filepath.Join(o.Dir, "logs")}
	if err := os.MkdirAll(s.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	log := o.Logger

	// The pieces that take long start side by side: Eureka (a JVM) while
	// the control plane comes up and the Go binaries build.
	eurekaCh := make(chan error, 1)
	go func() {
		var err error
		s.Eureka, err = harness.StartEureka(ctx, harness.EurekaOptions{Port: o.EurekaPort, Profile: o.EurekaProfile, LogDir: s.LogDir})
		eurekaCh <- err
	}()
	binCh := make(chan error, 1)
	var registrarBin, appBin, managerBin string
	go func() {
		var err error
		if registrarBin, err = harness.BuildBinary("./cmd/registrar", o.Dir); err == nil {
			if appBin, err = harness.BuildBinary("./tests/podrunner/testapp", o.Dir); err == nil {
				managerBin, err = harness.BuildBinary("./cmd/manager", o.Dir)
			}
		}
		binCh <- err
	}()

	log.Info("starting kube-apiserver and etcd")
	s.ControlPlane, err = harness.StartControlPlane(ctx, harness.ControlPlaneOptions{})
	if err != nil {
		return nil, errors.Join(err, <-eurekaCh, <-binCh)
	}
	s.Kubeconfig = filepath.Join(o.Dir, "kubeconfig")
	if err := copyFile(s.ControlPlane.Kubeconfig, s.Kubeconfig); err != nil {
		return nil, errors.Join(err, <-eurekaCh, <-binCh)
	}
	log.Info("starting kube-controller-manager")
	s.ControllerManager, err = s.ControlPlane.StartControllerManager(ctx, filepath.Join(s.LogDir, "kube-controller-manager.log"))
	if err != nil {
		return nil, errors.Join(err, <-eurekaCh, <-binCh)
	}
	if err := <-binCh; err != nil {
		return nil, errors.Join(err, <-eurekaCh)
	}
	log.Info("waiting for the Eureka server")
	if err := <-eurekaCh; err != nil {
		return nil, err
	}

	log.WithField("replicas", o.ManagerReplicas).Info("starting the Eurekube manager")
	s.Eurekube, err = harness.StartEurekube(ctx, s.ControlPlane, harness.EurekubeOptions{
		Replicas:     o.ManagerReplicas,
		BinDir:       o.Dir,
		Binary:       managerBin,
		EurekaURLs:   []string{s.Eureka.URL()},
		ResyncPeriod: o.ResyncPeriod,
	})
	if err != nil {
		return nil, err
	}

	log.Info("starting the pod runner")
	s.Runner, err = podrunner.New(podrunner.Options{
		Config:       s.ControlPlane.Config,
		RegistrarBin: registrarBin,
		AppBin:       appBin,
		LogDir:       s.LogDir,
		Logger:       log.WithField("component", "pod-runner"),
	})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.stopRunner, s.runnerDone = cancel, make(chan error, 1)
	go func() { s.runnerDone <- s.Runner.Run(runCtx) }()
	return s, nil
}

// Stop ends every process the sandbox started, the pods' first (killed,
// as when a node goes away), then Eurekube, the controller manager, Eureka
// and the control plane.
func (s *Sandbox) Stop() error {
	var errs []error
	if s.stopRunner != nil {
		s.stopRunner()
		if err := <-s.runnerDone; err != nil {
			errs = append(errs, err)
		}
	}
	if s.Eurekube != nil {
		s.Eurekube.Stop()
	}
	if s.ControllerManager != nil {
		errs = append(errs, s.ControllerManager.Stop())
	}
	if s.Eureka != nil {
		errs = append(errs, s.Eureka.Stop())
	}
	if s.ControlPlane != nil {
		errs = append(errs, s.ControlPlane.Stop())
	}
	return errors.Join(errs...)
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}
