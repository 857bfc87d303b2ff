package controller

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
)

// readsFixture is the clients of a manager whose reads of Secrets and
// ConfigMaps go to reader, on a clock the test moves.
type readsFixture struct {
	reader  *recordingReader
	clients *clients
	now     time.Time
}

func newReadsFixture() *readsFixture {
	f := &readsFixture{
		reader: &recordingReader{
			secrets:    map[string]map[string][]byte{"creds": {"username": []byte("u"), "password": []byte("first")}},
			configMaps: map[string]map[string]string{},
		},
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	reads := newAccessReads(f.reader)
	reads.now = func() time.Time { return f.now }
	log := logrus.New()
	log.SetOutput(io.Discard)
	f.clients = &clients{reads: reads, defaults: []string{"http://eureka.invalid:8761/eureka"}, maxAge: time.Minute, log: log}
	return f
}

// reconcile is what one reconcile of s reads: the objects it got from the
// API server, and the password its Eureka client sends.
func (f *readsFixture) reconcile(t *testing.T, s *v1alpha1.EurekaSyncer) (gets []string, password string) {
	t.Helper()
	f.reader.got = nil
	cache, err := f.clients.forSyncer(context.Background(), s)
	if err != nil {
		t.Fatalf("reconcile of %s: %v", s.Name, err)
	}
	access, err := readEurekaAccess(context.Background(), f.clients.reads.forSyncer(s), v1alpha1.ReadGrant{}, s)
	if err != nil {
		t.Fatal(err)
	}
	if cache == nil {
		t.Fatal("no registry cache")
	}
	return slices.Clone(f.reader.got), access.credentials.Password
}

// A syncer that stays healthy reads its Secret from the API server once
// per TTL, whatever the number of its reconciles and of the syncers that
// name the same Secret; the read after the TTL sees a rotated password.
func TestAccessReads_AHealthySyncerReadsItsSecretOncePerTTL(t *testing.T) {
	f := newReadsFixture()
	orders := builders.Syncer("shop", "orders", builders.Credentials("creds"))
	ledger := builders.Syncer("shop", "ledger", builders.Credentials("creds"))

	if gets, _ := f.reconcile(t, orders); !slices.Equal(gets, []string{"Secret/creds"}) {
		t.Fatalf("first reconcile read %v, want the Secret", gets)
	}
	// The second syncer's first reconcile, over a second later, reads
	// afresh, as any syncer not yet settled does.
	f.now = f.now.Add(accessShareWithin + time.Millisecond)
	if gets, _ := f.reconcile(t, ledger); !slices.Equal(gets, []string{"Secret/creds"}) {
		t.Fatalf("the second syncer's first reconcile read %v, want the Secret", gets)
	}
	f.reader.secrets["creds"]["password"] = []byte("second")
	for range 8 {
		f.now = f.now.Add(30 * time.Second)
		for _, s := range []*v1alpha1.EurekaSyncer{orders, ledger} {
			if gets, password := f.reconcile(t, s); len(gets) > 0 || password != "first" {
				t.Fatalf("%s, settled, within the TTL: read %v, password %q; want no read and the cached password", s.Name, gets, password)
			}
		}
	}
	f.now = f.now.Add(accessReadTTL)
	gets, password := f.reconcile(t, orders)
	if !slices.Equal(gets, []string{"Secret/creds"}) || password != "second" {
		t.Fatalf("after the TTL: read %v, password %q; want the Secret read again and the rotated password", gets, password)
	}
}

// A syncer never read for takes a read of the same Secret that another
// syncer made less than accessShareWithin ago, not an older one; a syncer
// that failed, or whose spec changed, reads the API server itself however
// recent the last read.
func TestAccessReads_ASyncerNeverReadForSharesAReadASecondOld(t *testing.T) {
	f := newReadsFixture()
	syncers := []*v1alpha1.EurekaSyncer{
		builders.Syncer("shop", "orders", builders.Credentials("creds")),
		builders.Syncer("shop", "ledger", builders.Credentials("creds")),
		builders.Syncer("shop", "billing", builders.Credentials("creds")),
	}
	if gets, _ := f.reconcile(t, syncers[0]); len(gets) != 1 {
		t.Fatalf("the first syncer read %v, want the Secret", gets)
	}
	f.reader.secrets["creds"]["password"] = []byte("second")
	f.now = f.now.Add(accessShareWithin / 2)
	if gets, password := f.reconcile(t, syncers[1]); len(gets) != 0 || password != "first" {
		t.Fatalf("a new syncer half a second after a read: read %v, password %q; want that read shared", gets, password)
	}
	f.now = f.now.Add(accessShareWithin)
	if gets, password := f.reconcile(t, syncers[2]); len(gets) != 1 || password != "second" {
		t.Fatalf("a new syncer 1.5 s after the last read: read %v, password %q; want the API server's", gets, password)
	}
	// Just read (above): a failed syncer and a changed one read anyway.
	f.clients.reads.unsettle(syncers[0])
	syncers[1].Generation++
	for _, s := range syncers[:2] {
		if gets, password := f.reconcile(t, s); len(gets) != 1 || password != "second" {
			t.Fatalf("%s, failed or changed: read %v, password %q; want the API server's", s.Name, gets, password)
		}
	}
}

// A syncer reads afresh after its spec changed, after Eureka failed it
// (unsettle), and after a read failed; a failed read is not kept for the
// other syncers.
func TestAccessReads_ASyncerReadsAfreshAfterASpecChangeOrAFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(f *readsFixture, s *v1alpha1.EurekaSyncer)
	}{
		{"spec changed", func(_ *readsFixture, s *v1alpha1.EurekaSyncer) { s.Generation++ }},
		{"Eureka failed", func(f *readsFixture, s *v1alpha1.EurekaSyncer) { f.clients.reads.unsettle(s) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newReadsFixture()
			s := builders.Syncer("shop", "orders", builders.Credentials("creds"))
			f.reconcile(t, s)
			f.reader.secrets["creds"]["password"] = []byte("second")
			tc.event(f, s)
			if gets, password := f.reconcile(t, s); len(gets) != 1 || password != "second" {
				t.Fatalf("after %s: read %v, password %q; want a read and the new password", tc.name, gets, password)
			}
			if gets, _ := f.reconcile(t, s); len(gets) != 0 {
				t.Fatalf("settled again, the syncer read %v", gets)
			}
		})
	}

	t.Run("read failed", func(t *testing.T) {
		f := newReadsFixture()
		s := builders.Syncer("shop", "orders", builders.Credentials("creds"))
		f.reconcile(t, s)
		forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "creds", errors.New("no RBAC policy matched"))
		f.clients.reads.unsettle(s)
		f.clients.reads.reader = failingGetter{err: forbidden}
		if _, err := f.clients.forSyncer(context.Background(), s); !apierrors.IsForbidden(err) {
			t.Fatalf("a forbidden read: %v, want Forbidden", err)
		}
		// Another syncer, never settled, cannot be served the old copy.
		f.clients.reads.reader = f.reader
		other := builders.Syncer("shop", "ledger", builders.Credentials("creds"))
		if gets, _ := f.reconcile(t, other); len(gets) != 1 {
			t.Fatalf("after a failed read another syncer read %v, want the API server", gets)
		}
		if gets, _ := f.reconcile(t, s); len(gets) != 1 {
			t.Fatalf("the syncer, failed before, read %v; want a read afresh", gets)
		}
		if gets, _ := f.reconcile(t, s); len(gets) != 0 {
			t.Fatalf("settled again, the syncer read %v", gets)
		}
	})
}

// A Secret without the consent label is not used: the error names it,
// the label and the command that adds it, with its own reason.
func TestReadEurekaAccess_AnUnconsentedSecretIsNotUsed(t *testing.T) {
	f := newReadsFixture()
	f.reader.unconsented = map[string]bool{"creds": true}
	s := builders.Syncer("shop", "orders", builders.Credentials("creds"))
	_, err := f.clients.forSyncer(context.Background(), s)
	if err == nil {
		t.Fatal("an unconsented Secret was used")
	}
	for _, want := range []string{"Secret shop/creds", "spec.eureka.credentialsSecretRef", v1alpha1.EurekaCredentialsLabel + "=true",
		"kubectl -n shop label secret creds " + v1alpha1.EurekaCredentialsLabel + "=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := configReason(err); got != reasonSecretNotConsented {
		t.Errorf("reason %s, want %s", got, reasonSecretNotConsented)
	}
	if len(f.clients.byKey) != 0 {
		t.Errorf("a Eureka client was made for the syncer")
	}
	// Labelled, it is used at the next reconcile.
	f.reader.unconsented = nil
	if _, password := f.reconcile(t, s); password != "first" {
		t.Errorf("labelled: password %q, want the Secret's", password)
	}
}

type failingGetter struct{ err error }

func (g failingGetter) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return g.err
}
