package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Kinds of identity a write can carry.
const (
	// KindPod: a pod's projected ServiceAccount token (Bearer), verified
	// by TokenReview.
	KindPod = "pod"
	// KindClient: credentials (Basic) from a Secret that EurekaAppPolicies
	// bind to apps.
	KindClient = "client"
	// KindNone: neither.
	KindNone = "none"
)

// Identity is who sent a request.
type Identity struct {
	Kind string
	// Pod: the pod's namespace, name, UID and ServiceAccount, as
	// TokenReview vouches for them.
	Namespace, Pod, PodUID, ServiceAccount string
	// Client: the Secret whose credentials the client sent.
	Secret string
	// Stale is true when the identity was verified earlier and TokenReview
	// cannot be reached now: enough to keep a lease, not to register.
	Stale bool
	// Manager: the pod is Eurekube's manager (its ServiceAccount is
	// Options.ManagerServiceAccount), which writes what the reconciler
	// does: Service-mode instances, Standby's overrides, orphans' cancels.
	Manager bool
}

// String names the identity in logs, audit lines and Events.
func (id Identity) String() string {
	switch id.Kind {
	case KindPod:
		if id.Manager {
			return "Eurekube's manager (pod " + id.Namespace + "/" + id.Pod + ")"
		}
		return "pod " + id.Namespace + "/" + id.Pod
	case KindClient:
		return "client of Secret " + id.Secret
	}
	return "anonymous"
}

// Reasons an identity is refused.
const (
	ReasonNoIdentity      = "NoIdentity"
	ReasonBadToken        = "TokenRefused"
	ReasonBadCredentials  = "CredentialsRefused"
	ReasonReviewDown      = "TokenReviewUnavailable"
	ReasonPodGone         = "PodGone"
	ReasonMalformedHeader = "MalformedAuthorization"
)

// authError is a request whose identity cannot be established.
type authError struct {
	status int
	reason string
	msg    string
}

func (e *authError) Error() string { return e.msg }

// TokenReviewer asks the API server who a token belongs to.
type TokenReviewer interface {
	Review(ctx context.Context, token string, audiences []string) (authnv1.TokenReviewStatus, error)
}

// ClientReviewer is a TokenReviewer over a controller-runtime client.
type ClientReviewer struct{ Client client.Client }

// Review creates a TokenReview.
func (c ClientReviewer) Review(ctx context.Context, token string, audiences []string) (authnv1.TokenReviewStatus, error) {
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: audiences}}
	if err := c.Client.Create(ctx, tr); err != nil {
		return authnv1.TokenReviewStatus{}, err
	}
	return tr.Status, nil
}

// Pod identity as TokenReview's status.user.extra carries it for a token
// bound to a pod.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
	saPrefix     = "system:serviceaccount:"
)

// tokens verifies Bearer tokens and remembers the verdicts: a success for
// TokenTTL, a refusal for a tenth of it (at least a second), so that a
// client's heartbeats cost no TokenReview each. A success is kept longer,
// as the last one known, for when TokenReview cannot be reached (Stale).
type tokens struct {
	reviewer  TokenReviewer
	audience  string
	ttl       time.Duration
	staleFor  time.Duration
	now       func() time.Time
	mu        sync.Mutex
	verdicts  map[[32]byte]tokenVerdict
	lastSweep time.Time
}

type tokenVerdict struct {
	id       Identity
	err      *authError
	until    time.Time // fresh until
	verified time.Time // when a success was verified last
}

func (t *tokens) identify(ctx context.Context, token string) (Identity, *authError) {
	key := sha256.Sum256([]byte(token))
	now := t.now()
	t.mu.Lock()
	v, seen := t.verdicts[key]
	t.mu.Unlock()
	if seen && now.Before(v.until) {
		return v.id, v.err
	}
	status, err := t.reviewer.Review(ctx, token, []string{t.audience})
	if err != nil {
		if seen && v.err == nil && now.Sub(v.verified) < t.staleFor {
			id := v.id
			id.Stale = true
			return id, nil
		}
		return Identity{}, &authError{http.StatusServiceUnavailable, ReasonReviewDown,
			fmt.Sprintf("the gateway cannot verify the token now (TokenReview: %v): writes of identities not verified before wait until it can", err)}
	}
	id, aerr := t.judge(status)
	fresh := tokenVerdict{id: id, err: aerr, until: now.Add(t.ttl)}
	if aerr != nil {
		fresh.until = now.Add(max(t.ttl/10, time.Second))
	} else {
		fresh.verified = now
	}
	t.mu.Lock()
	if t.verdicts == nil {
		t.verdicts = map[[32]byte]tokenVerdict{}
	}
	t.verdicts[key] = fresh
	if now.Sub(t.lastSweep) > t.staleFor {
		for k, old := range t.verdicts {
			if now.Sub(old.until) > t.staleFor {
				delete(t.verdicts, k)
			}
		}
		t.lastSweep = now
	}
	t.mu.Unlock()
	return id, aerr
}

// judge reads TokenReview's answer: authenticated, for the gateway's
// audience, a ServiceAccount's, bound to a pod.
func (t *tokens) judge(s authnv1.TokenReviewStatus) (Identity, *authError) {
	refuse := func(msg string) (Identity, *authError) {
		return Identity{}, &authError{http.StatusUnauthorized, ReasonBadToken, msg}
	}
	switch {
	case !s.Authenticated:
		why := s.Error
		if why == "" {
			why = "not authenticated"
		}
		return refuse(fmt.Sprintf("the token is refused (%s): an expired token, a token for another audience than %q, or one whose pod is gone", why, t.audience))
	case !slices.Contains(s.Audiences, t.audience):
		return refuse(fmt.Sprintf("the token is not for audience %q (it is for %v): the registrar's projected token names the gateway's audience", t.audience, s.Audiences))
	}
	rest, ok := strings.CutPrefix(s.User.Username, saPrefix)
	ns, sa, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return refuse(fmt.Sprintf("the token is %s's, not a ServiceAccount's: pods write with their projected ServiceAccount token", s.User.Username))
	}
	pod, uid := first(s.User.Extra[extraPodName]), first(s.User.Extra[extraPodUID])
	if pod == "" || uid == "" {
		return refuse(fmt.Sprintf("the token of ServiceAccount %s/%s is bound to no pod: the gateway takes only a pod's projected token, which dies with the pod", ns, sa))
	}
	return Identity{Kind: KindPod, Namespace: ns, ServiceAccount: sa, Pod: pod, PodUID: uid}, nil
}

func first(v authnv1.ExtraValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// clients checks Basic credentials against the Secrets policies name.
type clients struct {
	reader    client.Reader
	namespace string
}

// identify finds the Secret, among those EurekaAppPolicies name, whose
// username and password the client sent.
func (c clients) identify(ctx context.Context, user, pass string) (Identity, *authError) {
	var policies v1alpha1.EurekaAppPolicyList
	if err := c.reader.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		return Identity{}, &authError{http.StatusServiceUnavailable, ReasonBadCredentials, fmt.Sprintf("list EurekaAppPolicies: %v", err)}
	}
	names := map[string]bool{}
	for _, p := range policies.Items {
		for _, s := range p.Spec.ClientSecrets {
			names[s] = true
		}
	}
	for name := range names {
		var s corev1.Secret
		if err := c.reader.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: name}, &s, client.UnsafeDisableDeepCopy); err != nil {
			continue
		}
		if equal(s.Data[corev1.BasicAuthUsernameKey], user) && equal(s.Data[corev1.BasicAuthPasswordKey], pass) && len(s.Data[corev1.BasicAuthPasswordKey]) > 0 {
			return Identity{Kind: KindClient, Secret: name}, nil
		}
	}
	return Identity{}, &authError{http.StatusUnauthorized, ReasonBadCredentials,
		fmt.Sprintf("the credentials of user %q match no Secret that an EurekaAppPolicy names in spec.clientSecrets (Secrets in namespace %s)", user, c.namespace)}
}

func equal(want []byte, got string) bool {
	return subtle.ConstantTimeCompare(want, []byte(got)) == 1
}

// errNoPodIP: the pod's status has no IP yet; the kubelet writes it
// shortly after the pod's sandbox starts.
var errNoPodIP = errors.New("no IP in the pod's status yet")

type authnStatus = authnv1.TokenReviewStatus
