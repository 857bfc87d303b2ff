package selfmanaged

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/eurekube/eurekube/certs"
)

// errNoCertificate fails TLS handshakes (and so /readyz) until the Secret
// holds a key pair.
var errNoCertificate = errors.New("no serving certificate yet: waiting for the leader to store one in the certificate Secret")

// Served serves the Secret's current key pair on every replica: its
// GetCertificate is the webhook server's tls.Config.GetCertificate. It
// watches that one Secret and nothing else.
type Served struct {
	clientset kubernetes.Interface
	namespace string
	name      string
	log       *logrus.Entry
	onLoad    func(*x509.Certificate)

	current atomic.Pointer[tls.Certificate]

	mu       sync.Mutex
	watchers []chan<- struct{}
}

// ServedOptions configure NewServed.
type ServedOptions struct {
	Clientset kubernetes.Interface
	// Namespace and Name of the Secret.
	Namespace, Name string
	Logger          *logrus.Entry
	// OnLoad, when set, is called with each newly served certificate.
	OnLoad func(*x509.Certificate)
}

// NewServed returns a Served that serves nothing until it is started.
func NewServed(o ServedOptions) *Served {
	return &Served{clientset: o.Clientset, namespace: o.Namespace, name: o.Name, log: o.Logger, onLoad: o.OnLoad}
}

// GetCertificate returns the current key pair, or an error (a failed
// handshake) while there is none.
func (s *Served) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.current.Load(); c != nil {
		return c, nil
	}
	return nil, errNoCertificate
}

// NeedLeaderElection is false: every replica serves the webhook.
func (s *Served) NeedLeaderElection() bool { return false }

// Start watches the Secret until ctx ends.
func (s *Served) Start(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(s.clientset, 0,
		informers.WithNamespace(s.namespace),
		informers.WithTweakListOptions(oneName(s.name)))
	inf := factory.Core().V1().Secrets().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.load(obj) },
		UpdateFunc: func(_, obj any) { s.load(obj) },
		// A deleted Secret is recreated by the leader; the key pair held
		// meanwhile is still the one clients trust.
		DeleteFunc: func(any) { s.notify() },
	}); err != nil {
		return fmt.Errorf("watch Secret %s/%s: %w", s.namespace, s.name, err)
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// subscribe returns a channel that receives (without blocking the watch)
// after every change of the Secret; the leader re-plans on it.
func (s *Served) subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.watchers = append(s.watchers, ch)
	s.mu.Unlock()
	return ch
}

func (s *Served) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *Served) load(obj any) {
	defer s.notify()
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	pair, err := tls.X509KeyPair(secret.Data[certs.CertFile], secret.Data[certs.KeyFile])
	if err != nil {
		if len(secret.Data[certs.CertFile]) > 0 {
			s.log.WithError(err).WithField("secret", s.name).Warn("the certificate Secret holds no usable key pair: serving the previous one")
		}
		return
	}
	if old := s.current.Load(); old != nil && old.Leaf.Equal(pair.Leaf) {
		return
	}
	s.current.Store(&pair)
	s.log.WithFields(logrus.Fields{
		"secret": s.name, "serial": pair.Leaf.SerialNumber.String(), "notAfter": stamp(pair.Leaf.NotAfter),
		"issuer": pair.Leaf.Issuer.CommonName,
	}).Info("serving the certificate of the certificate Secret")
	if s.onLoad != nil {
		s.onLoad(pair.Leaf)
	}
}

// oneName narrows a list or watch to the object called name: RBAC can
// then grant list and watch on that name only.
func oneName(name string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
}
