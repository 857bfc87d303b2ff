package manager

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/certs/selfmanaged"
)

// CertificateLifetimes are the self-managed certificates' validities and
// the delay between a new CA entering the caBundle and a certificate it
// signed being served. Zero values are the defaults of package
// selfmanaged; tests shorten them to seconds.
type CertificateLifetimes struct {
	CA, Serving, TrustDelay time.Duration
}

var certificateExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "eurekube_webhook_certificate_expiry_timestamp_seconds",
	Help: "When the serving certificate the webhook server presents expires (its NotAfter), in seconds since the Unix epoch.",
})

func init() {
	metrics.Registry.MustRegister(certificateExpiry)
}

func observeServed(cert *x509.Certificate) {
	certificateExpiry.Set(float64(cert.NotAfter.Unix()))
}

// webhookCertificates is where the webhook server's key pair comes from:
// its GetCertificate, and what must run beside the server to keep it
// current.
type webhookCertificates struct {
	getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// everyReplica runs on every replica; leader only on the leader.
	everyReplica manager.Runnable
	leader       func(manager.Manager) manager.Runnable
}

// newWebhookCertificates sets up cfg's certificate mode. The webhook
// server, given a GetCertificate, skips its own file watcher
// (controller-runtime's webhook.DefaultServer.Start).
func newWebhookCertificates(cfg Config, restCfg *rest.Config, log *logrus.Entry) (*webhookCertificates, error) {
	if cfg.CertificateMode != CertificateModeSelfManaged {
		return fileCertificates(cfg.CertDir)
	}
	clientset, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("certificates: API client: %w", err)
	}
	log = log.WithField("part", "certificates")
	served := selfmanaged.NewServed(selfmanaged.ServedOptions{
		Clientset: clientset,
		Namespace: cfg.Namespace,
		Name:      cfg.CertificateSecret,
		Logger:    log,
		OnLoad:    observeServed,
	})
	leader := func(mgr manager.Manager) manager.Runnable {
		return selfmanaged.NewIssuer(selfmanaged.IssuerOptions{
			Clientset:            clientset,
			Served:               served,
			Namespace:            cfg.Namespace,
			SecretName:           cfg.CertificateSecret,
			WebhookConfiguration: cfg.WebhookConfiguration,
			DNSNames:             ServiceDNSNames(cfg.WebhookService, cfg.Namespace),
			CAValidity:           cfg.CertificateLifetimes.CA,
			ServingValidity:      cfg.CertificateLifetimes.Serving,
			TrustDelay:           cfg.CertificateLifetimes.TrustDelay,
			Recorder:             mgr.GetEventRecorder("eurekube"),
			Logger:               log,
		})
	}
	return &webhookCertificates{getCertificate: served.GetCertificate, everyReplica: served, leader: leader}, nil
}

// fileCertificates serves tls.crt and tls.key of dir, as cert-manager's
// Secret volume holds them, through controller-runtime's certificate
// watcher (fsnotify plus a 10 s poll): the one the webhook server would
// start itself, started here to observe what it serves.
func fileCertificates(dir string) (*webhookCertificates, error) {
	w, err := certwatcher.New(filepath.Join(dir, certs.CertFile), filepath.Join(dir, certs.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("webhook certificate in --cert-dir %s: %w", dir, err)
	}
	w.RegisterCallback(func(c tls.Certificate) {
		if c.Leaf != nil {
			observeServed(c.Leaf)
		}
	})
	return &webhookCertificates{getCertificate: w.GetCertificate, everyReplica: w}, nil
}

// ServiceDNSNames are the names a Service is reached by inside the
// cluster, which the serving certificate is issued for.
func ServiceDNSNames(service, namespace string) []string {
	return []string{service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
}
