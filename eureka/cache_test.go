package eureka_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
)

// fakeRegistry serves GET /eureka/apps in the Spring server's JSON shape
// and counts the reads; the cache's contract is about how many requests
// reach a server, which the real one cannot count.
type fakeRegistry struct {
	*httptest.Server
	reads   atomic.Int64
	failing atomic.Bool
	// release, when set, holds every read until it is closed.
	release chan struct{}
}

func newFakeRegistry(t *testing.T, apps map[string][]string) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{}
	body := appsJSON(apps)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/eureka/apps" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		f.reads.Add(1)
		if f.release != nil {
			<-f.release
		}
		if f.failing.Load() {
			http.Error(w, "registry unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeRegistry) url() string { return f.URL + "/eureka" }

// appsJSON renders apps (app → syncer of each instance) as GET /apps
// answers.
func appsJSON(apps map[string][]string) string {
	var appParts []string
	total := 0
	for app, syncers := range apps {
		var insts []string
		for i, syncer := range syncers {
			insts = append(insts, fmt.Sprintf(`{"instanceId":"%[1]s-%[2]d:%[1]s:8080","hostName":"10.0.0.%[2]d","app":"%[3]s","ipAddr":"10.0.0.%[2]d",`+
				`"status":"UP","overriddenStatus":"UNKNOWN","port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,`+
				`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
				`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":1,"lastRenewalTimestamp":1,"evictionTimestamp":0,"serviceUpTimestamp":1},`+
				`"metadata":{"eurekube.io/managed-by":"eurekube","eurekube.io/syncer":"%[4]s"},"vipAddress":"%[1]s","lastUpdatedTimestamp":"1","lastDirtyTimestamp":"1","actionType":"ADDED"}`,
				strings.ToLower(app), i+1, app, syncer))
			total++
		}
		appParts = append(appParts, fmt.Sprintf(`{"name":"%s","instance":[%s]}`, app, strings.Join(insts, ",")))
	}
	return fmt.Sprintf(`{"applications":{"versions__delta":"1","apps__hashcode":"UP_%d_","application":[%s]}}`, total, strings.Join(appParts, ","))
}

func newCache(t *testing.T, url string, maxAge time.Duration) *eureka.RegistryCache {
	t.Helper()
	c, err := eureka.New(eureka.Options{URLs: []string{url}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return eureka.NewRegistryCache(c, maxAge)
}

// readAll reads the registry from n goroutines at once.
func readAll(cache *eureka.RegistryCache, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = cache.Registry(context.Background())
		})
	}
	wg.Wait()
	return errs
}

func TestRegistryCache_AThousandConcurrentReadersCostOneRequest(t *testing.T) {
	f := newFakeRegistry(t, map[string][]string{"ORDERS": {"orders", "orders"}})
	f.release = make(chan struct{})
	cache := newCache(t, f.url(), time.Minute)
	done := make(chan []error)
	go func() { done <- readAll(cache, 1000) }()
	time.Sleep(100 * time.Millisecond) // the readers pile up behind the held read
	close(f.release)
	for _, err := range <-done {
		if err != nil {
			t.Fatal(err)
		}
	}
	readAll(cache, 1000) // later readers within maxAge: no request at all
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("%d reads of the registry for 2,000 readers, want 1", n)
	}
}

func TestRegistryCache_ReadsAgainOnceTheLastReadIsOlderThanMaxAge(t *testing.T) {
	f := newFakeRegistry(t, map[string][]string{"ORDERS": {"orders"}})
	cache := newCache(t, f.url(), 200*time.Millisecond)
	readAll(cache, 10)
	readAll(cache, 10)
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("%d reads within maxAge, want 1", n)
	}
	time.Sleep(250 * time.Millisecond)
	readAll(cache, 10)
	if n := f.reads.Load(); n != 2 {
		t.Fatalf("%d reads after maxAge, want 2", n)
	}
}

func TestRegistryCache_AFailedReadReachesEveryReaderUntilMaxAge(t *testing.T) {
	f := newFakeRegistry(t, map[string][]string{"ORDERS": {"orders"}})
	f.failing.Store(true)
	cache := newCache(t, f.url(), 200*time.Millisecond)
	for _, err := range append(readAll(cache, 100), readAll(cache, 100)...) {
		if !errors.Is(err, eureka.ErrUnavailable) || !strings.Contains(err.Error(), f.URL) {
			t.Fatalf("reader got %v, want ErrUnavailable naming %s", err, f.URL)
		}
	}
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("%d reads while the server fails, want 1 per maxAge", n)
	}
	f.failing.Store(false)
	time.Sleep(250 * time.Millisecond)
	for _, err := range readAll(cache, 100) {
		if err != nil {
			t.Fatalf("after the server recovered: %v", err)
		}
	}
}

func TestRegistryCache_AReaderThatGivesUpDoesNotFailTheOthers(t *testing.T) {
	f := newFakeRegistry(t, map[string][]string{"ORDERS": {"orders"}})
	f.release = make(chan struct{})
	cache := newCache(t, f.url(), time.Minute)
	impatient, cancel := context.WithCancel(context.Background())
	first := make(chan error)
	go func() { _, err := cache.Registry(impatient); first <- err }()
	second := make(chan error)
	go func() { _, err := cache.Registry(context.Background()); second <- err }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the reader that gave up got %v, want context.Canceled", err)
	}
	close(f.release)
	if err := <-second; err != nil {
		t.Fatalf("the reader that waited got %v", err)
	}
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1", n)
	}
}

func TestRegistry_ListsAnAppsInstancesByMetadataCaseInsensitively(t *testing.T) {
	f := newFakeRegistry(t, map[string][]string{"ORDERS": {"orders", "orders", "orders-v2"}, "CART": {"cart"}})
	reg, err := newCache(t, f.url(), time.Minute).Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if reg.Len() != 4 || len(reg.Instances("orders")) != 3 || len(reg.Instances("unknown")) != 0 {
		t.Fatalf("registry of %d, orders %d, unknown %d; want 4, 3, 0", reg.Len(), len(reg.Instances("orders")), len(reg.Instances("unknown")))
	}
	got := reg.InstancesWithMetadata("Orders", map[string]string{eureka.MetaSyncer: "orders"})
	if len(got) != 2 || got[0].Port != 8080 || !got[0].PortEnabled || got[0].Metadata[eureka.MetaManagedBy] != eureka.ManagedByValue {
		t.Fatalf("orders' instances of syncer orders: %+v", got)
	}
	// Readers share one registry: what one changes in its list stays its own.
	got[0].Status = eureka.StatusDown
	if again := reg.InstancesWithMetadata("ORDERS", map[string]string{eureka.MetaSyncer: "orders"}); again[0].Status != eureka.StatusUp {
		t.Fatalf("a reader's change reached the shared registry: %s", again[0].Status)
	}
}
