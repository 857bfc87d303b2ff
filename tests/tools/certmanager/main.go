// Command certmanager runs cert-manager's own controllers and cainjector,
// built from the github.com/cert-manager/cert-manager module that Eurekube's
// go.mod requires, against the API server of a kubeconfig: the certificates
// controllers, the SelfSigned and CA issuers (Issuers and ClusterIssuers) and
// the CA injector for webhook configurations, API services and CRDs.
//
// cert-manager publishes its binaries' main packages (cmd/controller,
// cmd/cainjector) as modules that are not on the Go module proxy, so this is
// the small main they would be for the issuers Eurekube uses: no ACME, Vault
// or Venafi, no leader election, no webhook (the harness installs the CRDs).
// The tests start it through tests/harness (StartCertManager), with the CRDs
// of the same module's deploy/crds.
//
// usage: certmanager --kubeconfig FILE [--health-probe-bind-address ADDR] [...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bombsimon/logrusr/v4"
	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// options are the command's flags. controller-runtime defines --kubeconfig
// on flag.CommandLine, so they live on a flag set of their own.
type options struct {
	kubeconfig               string
	healthProbeBindAddress   string
	clusterResourceNamespace string
	// cert-manager's own flags default the retry after a failed
	// CertificateRequest to 1 h, doubling up to 32 h: far longer than any
	// test, so a test tool retries within seconds.
	certificateRequestMinimumBackoff time.Duration
	certificateRequestMaximumBackoff time.Duration
	workers                          int
	logLevel                         string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("certmanager", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server (default $KUBECONFIG)")
	fs.StringVar(&o.healthProbeBindAddress, "health-probe-bind-address", "127.0.0.1:9403", "address of /healthz and /readyz (ready once every informer has synced)")
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "cert-manager", "namespace of the Secrets that ClusterIssuers read")
	fs.DurationVar(&o.certificateRequestMinimumBackoff, "certificate-request-minimum-backoff-duration", 5*time.Second, "first retry delay after a failed CertificateRequest (cert-manager's default: 1h)")
	fs.DurationVar(&o.certificateRequestMaximumBackoff, "certificate-request-maximum-backoff-duration", time.Minute, "longest retry delay after failed CertificateRequests (cert-manager's default: 32h)")
	fs.IntVar(&o.workers, "concurrent-workers", 2, "workers per controller")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.kubeconfig == "" {
		return o, fmt.Errorf("--kubeconfig (or $KUBECONFIG) is required")
	}
	if o.certificateRequestMinimumBackoff <= 0 || o.certificateRequestMaximumBackoff < o.certificateRequestMinimumBackoff {
		return o, fmt.Errorf("want 0 < --certificate-request-minimum-backoff-duration (%s) <= --certificate-request-maximum-backoff-duration (%s)",
			o.certificateRequestMinimumBackoff, o.certificateRequestMaximumBackoff)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "certmanager:", err)
		os.Exit(2)
	}
	log, err := newLogger(o.logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "certmanager:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(logr.NewContext(ctx, log), o); err != nil {
		log.Error(err, "cert-manager stopped")
		os.Exit(1)
	}
	log.Info("cert-manager stopped")
}

// newLogger writes JSON lines to stderr, the shape of Eurekube's own
// binaries, and routes klog (cert-manager's logger) and controller-runtime
// (the cainjector's) through it.
func newLogger(level string) (logr.Logger, error) {
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return logr.Logger{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(lvl)
	l.SetFormatter(&logrus.JSONFormatter{})
	log := logrusr.New(l.WithField("component", "cert-manager"))
	klog.SetLogger(log)
	ctrl.SetLogger(log)
	return log, nil
}
