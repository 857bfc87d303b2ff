package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/certs"
)

// EurekubeOptions configure StartEurekube.
type EurekubeOptions struct {
	// Replicas of the manager (default 1). With more than one, they elect a
	// leader for the reconciler and all serve the webhook, as in a cluster.
	Replicas int
	// BinDir receives the manager binary (unless Binary is set), the
	// certificates and the logs.
	BinDir string
	Binary string
	// The rest are ManagerOptions for every replica.
	EurekaURLs          []string
	ClusterID           string
	DefaultDrainSeconds int32
	ResyncPeriod        time.Duration
	ExtraArgs           []string
}

// Eurekube is Eurekube installed on a control plane: manager replicas with
// a bootstrapped webhook certificate behind one Service, and the
// MutatingWebhookConfiguration of manifests/ pointing at that Service.
type Eurekube struct {
	Managers []*Manager
	Service  *Service
	// CA signed the webhook's serving certificate; its PEM is the caBundle.
	CA      *certs.CA
	CertDir string

	opts       EurekubeOptions
	kubeconfig string
}

// StartEurekube installs Eurekube on cp as a cluster would run it.
func StartEurekube(ctx context.Context, cp *ControlPlane, o EurekubeOptions) (*Eurekube, error) {
	if o.BinDir == "" {
		return nil, errors.New("eurekube: EurekubeOptions needs a BinDir")
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}}
	if err := cp.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("eurekube: namespace %s: %w", ManagerNamespace, err)
	}
	e := &Eurekube{CertDir: filepath.Join(o.BinDir, "certs")}
	var err error
	if e.CA, err = certs.Bootstrap(e.CertDir, certs.LocalHosts()); err != nil {
		return nil, fmt.Errorf("eurekube: webhook certificate: %w", err)
	}
	if o.Binary == "" {
		if o.Binary, err = BuildBinary("./cmd/manager", o.BinDir); err != nil {
			return nil, err
		}
	}
	// The manager runs as its ServiceAccount, with the RBAC of manifests/.
	if e.kubeconfig, err = cp.ManagerKubeconfig(ctx); err != nil {
		return nil, fmt.Errorf("eurekube: %w", err)
	}
	e.opts = o
	backends := make([]string, 0, o.Replicas)
	for i := range o.Replicas {
		m, err := e.startReplica(ctx, i)
		if err != nil {
			e.Stop()
			return nil, err
		}
		e.Managers = append(e.Managers, m)
		backends = append(backends, m.WebhookAddr())
	}
	if e.Service, err = StartService(backends...); err != nil {
		e.Stop()
		return nil, fmt.Errorf("eurekube: %w", err)
	}
	if err := cp.InstallWebhook(ctx, LocalWebhook{Port: e.Service.Port(), CABundle: e.CA.PEM}); err != nil {
		e.Stop()
		return nil, fmt.Errorf("eurekube: %w", err)
	}
	return e, nil
}

func (e *Eurekube) startReplica(ctx context.Context, i int) (*Manager, error) {
	o := e.opts
	m, err := StartManager(ctx, ManagerOptions{
		Binary:              o.Binary,
		Kubeconfig:          e.kubeconfig,
		EurekaURLs:          o.EurekaURLs,
		ClusterID:           o.ClusterID,
		DefaultDrainSeconds: o.DefaultDrainSeconds,
		ResyncPeriod:        o.ResyncPeriod,
		CertDir:             e.CertDir,
		LeaderElect:         o.Replicas > 1,
		ExtraArgs:           o.ExtraArgs,
		LogPath:             filepath.Join(o.BinDir, "manager-"+strconv.Itoa(i)+".log"),
	})
	if err != nil {
		return nil, fmt.Errorf("eurekube: manager replica %d: %w", i, err)
	}
	return m, nil
}

// Replace starts replica i again, as its Deployment replaces a pod that
// died, and puts it behind the Service once it is ready.
func (e *Eurekube) Replace(ctx context.Context, i int) error {
	_ = e.Managers[i].Stop()
	m, err := e.startReplica(ctx, i)
	if err != nil {
		return err
	}
	e.Managers[i] = m
	backends := make([]string, len(e.Managers))
	for j, r := range e.Managers {
		backends[j] = r.WebhookAddr()
	}
	e.Service.SetBackends(backends...)
	return nil
}

// Stop ends every manager replica and the Service. The webhook
// configuration stays; with failurePolicy Fail, pod creation in labelled
// namespaces fails from now on, as it would in a cluster.
func (e *Eurekube) Stop() {
	for _, m := range e.Managers {
		_ = m.Stop()
	}
	if e.Service != nil {
		_ = e.Service.Close()
	}
}
