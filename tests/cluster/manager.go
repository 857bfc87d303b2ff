package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/tests/harness"
)

// More names from manifests/: the webhook's Service and port, the metrics
// port, the ClusterRole that may read /metrics, and the manager pods'
// labels.
const (
	WebhookService      = "eurekube-webhook"
	webhookPort         = 9443
	metricsPort         = 8443
	metricsReaderRole   = "eurekube-metrics-reader"
	metricsScraper      = "eurekube-test-scraper"
	managerComponentKey = "app.kubernetes.io/component"
)

// ManagerPods are the manager Deployment's pods, as the kubelet last
// reported them.
func (c *Cluster) ManagerPods(ctx context.Context) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := c.Node.Client.List(ctx, &list, client.InNamespace(ManagerNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "eurekube", managerComponentKey: "manager"})
	if err != nil {
		return nil, fmt.Errorf("list manager pods: %w", err)
	}
	return list.Items, nil
}

// WebhookClient speaks HTTPS to the manager's webhook as the API server
// does: it trusts only the caBundle cainjector put into the webhook
// configuration and checks the certificate's name against the Service's.
// Its requests may go to a pod's IP (WebhookURL) to reach one replica.
func (c *Cluster) WebhookClient(ctx context.Context) (*http.Client, error) {
	var wh admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Name: WebhookConfig}, &wh); err != nil {
		return nil, fmt.Errorf("webhook configuration: %w", err)
	}
	if len(wh.Webhooks) == 0 || len(wh.Webhooks[0].ClientConfig.CABundle) == 0 {
		return nil, errors.New("webhook configuration: no caBundle")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(wh.Webhooks[0].ClientConfig.CABundle) {
		return nil, errors.New("webhook configuration: caBundle holds no certificate")
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{
			RootCAs: pool, MinVersion: tls.VersionTLS12,
			ServerName: WebhookService + "." + ManagerNamespace + ".svc",
		},
		MaxIdleConnsPerHost: 8,
	}}, nil
}

// WebhookURL is the URL of path on one manager pod's webhook server.
func WebhookURL(p *corev1.Pod, path string) string {
	return "https://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(webhookPort)) + path
}

// ManagerMetrics scrapes one manager pod's /metrics as Prometheus would:
// over HTTPS with a ServiceAccount token bound to the metrics-reader
// ClusterRole. The manager serves metrics with the certificate
// controller-runtime generates for itself, which nothing can verify; the
// token is what guards the endpoint.
func (c *Cluster) ManagerMetrics(ctx context.Context, p *corev1.Pod) (map[string]float64, error) {
	token, err := c.scraperToken(ctx)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
	}}
	url := "https://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(metricsPort)) + "/metrics"
	return harness.MetricsFrom(ctx, hc, url, token)
}

// scraper is the metrics scraper's token, made on first use.
type scraper struct {
	sync.Mutex
	token   string
	expires time.Time
}

// scraperToken is a token of a ServiceAccount bound to the metrics-reader
// ClusterRole, made on first use.
func (c *Cluster) scraperToken(ctx context.Context) (string, error) {
	scraper := &c.scraper
	scraper.Lock()
	defer scraper.Unlock()
	if scraper.token != "" && time.Until(scraper.expires) > time.Minute {
		return scraper.token, nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: metricsScraper, Namespace: ManagerNamespace}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: metricsScraper},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: metricsScraper, Namespace: ManagerNamespace}},
	}
	for _, obj := range []client.Object{sa, binding} {
		if err := c.Node.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("metrics scraper: create %T: %w", obj, err)
		}
	}
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ManagerNamespace).CreateToken(ctx, metricsScraper,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("metrics scraper: token: %w", err)
	}
	scraper.token, scraper.expires = tr.Status.Token, tr.Status.ExpirationTimestamp.Time
	return scraper.token, nil
}

// ManagerLog is what the manager container of pod p has written since it
// last started, as kubectl logs shows it.
func (c *Cluster) ManagerLog(ctx context.Context, p *corev1.Pod) ([]byte, error) {
	out, err := c.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "manager"}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("logs of %s: %w", p.Name, err)
	}
	return out, nil
}
