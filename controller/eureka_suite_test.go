package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// countingEureka is a Eureka server with an empty registry that counts the
// requests it gets, by path.
type countingEureka struct {
	*httptest.Server
	mu    sync.Mutex
	paths map[string]int
}

func newCountingEureka(t *testing.T) *countingEureka {
	t.Helper()
	e := &countingEureka{paths: map[string]int{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.paths[r.URL.Path]++
		e.mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/apps"), strings.HasSuffix(r.URL.Path, "/apps/"), strings.HasSuffix(r.URL.Path, "/apps/delta"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"applications":{"versions__delta":"1","apps__hashcode":"","application":[]}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(e.Close)
	return e
}

// requests counts the requests whose path begins with prefix.
func (e *countingEureka) requests(prefix string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for p, c := range e.paths {
		if strings.HasPrefix(p, prefix) {
			n += c
		}
	}
	return n
}

// seen lists the paths requested.
func (e *countingEureka) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for p := range e.paths {
		out = append(out, p)
	}
	return out
}

// serverSetGauge is a registry gauge's series for the server sets of the
// counting server (by canonical server set).
func serverSetGauge(name string, e *countingEureka) (map[string]float64, error) {
	host := strings.TrimPrefix(e.URL, "http://")
	return gaugeSeries(name, func(l map[string]string) (string, bool) {
		return l["servers"], strings.Contains(l["servers"], host)
	})
}

// A tenant writes one server's URL in every spelling it can (case, a
// trailing slash or two, a default-looking port with a leading zero, dot
// segments, an escaped letter, a duplicate) across many syncers: the
// manager holds one cache, one copy of the registry, for all of them, and
// the server only ever sees the canonical path.
func TestServerSets_ManySpellingsOfOneServerShareOneCache(t *testing.T) {
	ctx := context.Background()
	tenant := newNamespace(t)
	e := newCountingEureka(t)
	hostPort := strings.TrimPrefix(e.URL, "http://")
	host, port, _ := strings.Cut(hostPort, ":")
	canonical := "http://" + hostPort + "/eureka"
	spellings := [][]string{
		{canonical},
		{"HTTP://" + hostPort + "/eureka/"},
		{canonical + "//"},
		{"http://" + host + ":0" + port + "/eureka"},
		{"http://" + hostPort + "/x/../eureka"},
		{"http://" + hostPort + "/%65ureka"},
		{"http://" + hostPort + "/./eureka/."},
		{canonical, canonical + "/"},
	}
	var syncers []*v1alpha1.EurekaSyncer
	for i, urls := range spellings {
		s := builders.Syncer(tenant, fmt.Sprintf("spelt-%d", i), builders.EurekaURLs(urls...))
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatalf("%v: %v", urls, err)
		}
		syncers = append(syncers, s)
	}
	for _, s := range syncers {
		harness.Eventually(t, patience, s.Name+" reads the server", reachable(s, metav1.ConditionTrue, ""))
	}
	harness.Eventually(t, patience, "one cache, read by every syncer", func() error {
		caches, err := serverSetGauge("eurekube_eureka_registry_caches", e)
		if err != nil {
			return err
		}
		readers, err := serverSetGauge("eurekube_eureka_registry_readers", e)
		if err != nil {
			return err
		}
		if fmt.Sprint(caches) != fmt.Sprintf("map[%s:1]", canonical) || fmt.Sprint(readers) != fmt.Sprintf("map[%s:%d]", canonical, len(syncers)) {
			return fmt.Errorf("caches %v, readers %v; want one cache of %s read by %d syncers", caches, readers, canonical, len(syncers))
		}
		return nil
	})
	for _, p := range e.seen() {
		if !strings.HasPrefix(p, "/eureka/apps") {
			t.Errorf("the server was asked for %s, not a path below the canonical /eureka", p)
		}
	}
	deleteSyncers(t, tenant)
}

// A tenant makes more distinct server sets than the manager's cap: those
// past it are refused, EurekaReachable False naming the cap, the flag and
// their servers, Synced False, and their servers never get a request; the
// others are read as usual. An import of one more set is refused alike.
func TestServerSets_PastTheCapAConditionAndNoRead(t *testing.T) {
	ctx := context.Background()
	tenant := newNamespace(t)
	e := newCountingEureka(t)
	var syncers []*v1alpha1.EurekaSyncer
	for i := range maxServerSets + 2 {
		s := builders.Syncer(tenant, fmt.Sprintf("set-%d", i), builders.EurekaURLs(fmt.Sprintf("%s/set-%d/eureka", e.URL, i)))
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		syncers = append(syncers, s)
	}
	capped := func(c *metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == "EurekaServerSetCapReached"
	}
	var refused []*v1alpha1.EurekaSyncer
	harness.Eventually(t, patience, "each syncer read, or refused past the cap", func() error {
		refused = nil
		for _, s := range syncers {
			c, _, err := condition(s, v1alpha1.ConditionEurekaReachable)
			if err != nil {
				return err
			}
			switch {
			case capped(c):
				refused = append(refused, s)
			case c.Status != metav1.ConditionTrue:
				return fmt.Errorf("%s: EurekaReachable %+v", s.Name, c)
			}
		}
		if len(refused) < 2 {
			return fmt.Errorf("%d syncer(s) refused, want at least 2 of %d past a cap of %d", len(refused), len(syncers), maxServerSets)
		}
		return nil
	})
	for _, s := range refused {
		// Reconciled again (a changed spec), still refused: no read meanwhile.
		patchSpec(t, s, `{"metadata":{"zone":"zone-b"}}`)
		path := strings.TrimPrefix(s.Spec.Eureka.ServiceURLs[0], e.URL)
		harness.Eventually(t, patience, s.Name+" refused naming the cap, the flag and its server, at its new generation", func() error {
			c, now, err := condition(s, v1alpha1.ConditionEurekaReachable)
			if err != nil {
				return err
			}
			if c.ObservedGeneration != now.Generation || !capped(c) {
				return fmt.Errorf("generation %d, EurekaReachable %+v", now.Generation, c)
			}
			for _, m := range []string{fmt.Sprintf("--max-eureka-server-sets=%d", maxServerSets), fmt.Sprintf("already reads %d", maxServerSets), s.Spec.Eureka.ServiceURLs[0]} {
				if !strings.Contains(c.Message, m) {
					return fmt.Errorf("EurekaReachable %q does not mention %q", c.Message, m)
				}
			}
			synced, _, err := condition(s, v1alpha1.ConditionSynced)
			if err != nil || synced.Status != metav1.ConditionFalse {
				return fmt.Errorf("Synced %+v, %v", synced, err)
			}
			return nil
		})
		if n := e.requests(strings.TrimSuffix(path, "/eureka") + "/"); n != 0 {
			t.Errorf("%s is refused, yet its server got %d request(s)", s.Name, n)
		}
	}
	// An import of yet another server set is refused the same way.
	imp := newImport(t, tenant, "CAPPED-"+strings.ToUpper(tenant[len(tenant)-5:]), func(spec *v1alpha1.EurekaImportSpec) {
		spec.Eureka.ServiceURLs = []string{e.URL + "/import/eureka"}
	})
	harness.Eventually(t, patience, "the import refused past the cap, naming the flag and its server", func() error {
		c, _, err := importCondition(imp, v1alpha1.ConditionEurekaReachable)
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "EurekaServerSetCapReached" || !strings.Contains(c.Message, fmt.Sprintf("--max-eureka-server-sets=%d", maxServerSets)) || !strings.Contains(c.Message, e.URL+"/import/eureka") {
			return fmt.Errorf("EurekaReachable %+v", c)
		}
		return nil
	})
	if n := e.requests("/import/"); n != 0 {
		t.Errorf("the refused import's server got %d request(s)", n)
	}
	if err := k8s.Delete(ctx, imp); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the import gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(imp), &v1alpha1.EurekaImport{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("import still there: %v", err)
		}
		return nil
	})
	deleteSyncers(t, tenant)
	harness.Eventually(t, patience, "the deleted syncers' caches gone, their places under the cap free", func() error {
		if caches, err := serverSetGauge("eurekube_eureka_registry_caches", e); err != nil || len(caches) > 0 {
			return fmt.Errorf("caches %v, %v", caches, err)
		}
		return nil
	})
}

// A tenant names an app the platform's policy grants another namespace:
// its syncer is refused by ownership, and the servers it names never get a request, through a
// change of its spec too.
func TestServerSets_ASyncerRefusedByOwnershipReadsNothing(t *testing.T) {
	ctx := context.Background()
	owner, evil := newNamespace(t), newNamespace(t)
	harness.SuspendSharedApps(ctx, t, k8s)
	app := "LEDGER-" + strings.ToUpper(owner[len(owner)-5:])
	policy := &v1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(app)},
		Spec: v1alpha1.EurekaAppPolicySpec{Apps: []string{app}, Namespaces: []string{owner}}}
	if err := k8s.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), policy) })
	e := newCountingEureka(t)
	s := builders.Syncer(evil, "squat", builders.AppName(app), builders.EurekaURLs(e.URL+"/eureka"))
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "refused, naming the policy", permitted(s, metav1.ConditionFalse, "", policy.Name))
	harness.Eventually(t, patience, "EurekaReachable False: not contacted", reachable(s, metav1.ConditionFalse, "", "not contacted"))
	patchSpec(t, s, `{"metadata":{"zone":"zone-b"}}`)
	harness.Eventually(t, patience, "the changed spec reconciled, still refused", func() error {
		c, now, err := condition(s, v1alpha1.ConditionEurekaReachable)
		if err != nil {
			return err
		}
		if c.ObservedGeneration != now.Generation || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "not contacted") {
			return fmt.Errorf("generation %d, EurekaReachable %+v", now.Generation, c)
		}
		return nil
	})
	if n := e.requests("/"); n != 0 {
		t.Fatalf("a syncer refused by ownership had %d request(s) sent to its server: %v", n, e.seen())
	}
	if caches, err := serverSetGauge("eurekube_eureka_registry_caches", e); err != nil || len(caches) > 0 {
		t.Fatalf("a refused syncer holds a cache: %v, %v", caches, err)
	}
}

// deleteSyncers deletes the syncers of namespace and waits until they are
// gone (their finalizers released).
func deleteSyncers(t *testing.T, namespace string) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.DeleteAllOf(ctx, &v1alpha1.EurekaSyncer{}, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the syncers of "+namespace+" gone", func() error {
		var list v1alpha1.EurekaSyncerList
		if err := k8s.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d syncer(s) left", len(list.Items))
		}
		return nil
	})
}
