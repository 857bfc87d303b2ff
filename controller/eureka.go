package controller

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// clients keeps one registry cache (and its eureka.Client) per set of URLs
// and credentials: the syncers of one Eureka server share its connections
// and one read of its registry per resync, however many they are. A
// rotated password makes a new cache; the few old ones are left for the
// garbage of a restart.
type clients struct {
	reader   client.Reader // uncached: Secrets are never cached
	defaults []string
	timeout  time.Duration
	// maxAge: the registry is read at most this often per server set.
	maxAge   time.Duration
	log      logrus.FieldLogger
	observer eureka.Observer

	mu    sync.Mutex
	byKey map[[32]byte]*eureka.RegistryCache
}

// forSyncer returns the registry cache of a syncer's servers and
// credentials.
func (c *clients) forSyncer(ctx context.Context, s *v1alpha1.EurekaSyncer) (*eureka.RegistryCache, error) {
	urls := s.Spec.Eureka.ServiceURLs
	if len(urls) == 0 {
		urls = c.defaults
	}
	var user, pass string
	if ref := s.Spec.Eureka.CredentialsSecretRef; ref != nil {
		var secret corev1.Secret
		// Uncached: the manager does not watch (and so does not keep) Secrets.
		if err := c.reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ref.Name}, &secret); err != nil {
			err = fmt.Errorf("read Eureka credentials from Secret %s: %w", ref.Name, err)
			if apierrors.IsForbidden(err) {
				// The manager may read Secrets only where a namespace grants it.
				err = fmt.Errorf("%w (grant the manager access in this namespace: kubectl -n %s create rolebinding eurekube-eureka-credentials --clusterrole=eurekube-eureka-credentials --serviceaccount=<manager namespace>:eurekube-manager)",
					err, s.Namespace)
			}
			return nil, err
		}
		user, pass = string(secret.Data["username"]), string(secret.Data["password"])
	}
	key := sha256.Sum256([]byte(strings.Join(urls, "\n") + "\x00" + user + "\x00" + pass))
	c.mu.Lock()
	defer c.mu.Unlock()
	if cache, ok := c.byKey[key]; ok {
		return cache, nil
	}
	cl, err := eureka.New(eureka.Options{URLs: urls, Username: user, Password: pass, Timeout: c.timeout, Logger: c.log, Observer: c.observer})
	if err != nil {
		return nil, fmt.Errorf("client for Eureka at %v: %w", urls, err)
	}
	cache := eureka.NewRegistryCache(cl, c.maxAge)
	c.byKey[key] = cache
	return cache, nil
}
