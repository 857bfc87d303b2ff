package eureka_test

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
)

// fakeRegistry serves GET /eureka/apps and /eureka/apps/delta in the
// Spring server's JSON shape and counts the reads; the cache's contract is
// about how many requests reach a server, which the real one cannot count.
type fakeRegistry struct {
	*httptest.Server
	wholeReads, deltaReads atomic.Int64
	failing                atomic.Bool
	whole, delta           atomic.Pointer[string]
	// release, when set, holds every read until it is closed.
	release chan struct{}
}

func newFakeRegistry(t *testing.T, apps map[string][]string) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{}
	f.set(apps, nil)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body string
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/eureka/apps":
			f.wholeReads.Add(1)
			body = *f.whole.Load()
		case r.Method == http.MethodGet && r.URL.Path == "/eureka/apps/delta":
			f.deltaReads.Add(1)
			body = *f.delta.Load()
		default:
			http.NotFound(w, r)
			return
		}
		if f.release != nil {
			<-f.release
		}
		if f.failing.Load() {
			http.Error(w, "registry unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") { // as Eureka's response cache does
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			_, _ = gz.Write([]byte(body))
			_ = gz.Close()
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeRegistry) url() string { return f.URL + "/eureka" }

// set makes the registry apps (app → syncer of each instance, all UP), and
// the delta changes (app → actionType of each instance, by index), with
// the hashcode of apps.
func (f *fakeRegistry) set(apps map[string][]string, changes map[string]map[int]string) {
	whole := appsJSON(apps, nil)
	f.whole.Store(&whole)
	delta := appsJSON(apps, changes)
	f.delta.Store(&delta)
}

// appsJSON renders apps as GET /apps answers, or, when changes is not nil,
// as GET /apps/delta answers: only the changed instances, each with its
// actionType.
func appsJSON(apps map[string][]string, changes map[string]map[int]string) string {
	var appParts []string
	total := 0
	names := map[string]bool{}
	for app := range apps {
		names[app] = true
	}
	for app := range changes {
		names[app] = true // an app whose last instance was deleted
	}
	for app := range names {
		syncers := apps[app]
		var insts []string
		n := len(syncers)
		for i := range changes[app] {
			n = max(n, i+1) // a deleted instance is no longer in apps
		}
		for i := range n {
			syncer := strings.ToLower(app)
			if i < len(syncers) {
				syncer = syncers[i]
				total++
			}
			action := "ADDED"
			if changes != nil {
				if action = changes[app][i]; action == "" {
					continue
				}
			}
			insts = append(insts, fmt.Sprintf(`{"instanceId":"%[1]s-%[2]d:%[1]s:8080","hostName":"10.0.0.%[2]d","app":"%[3]s","ipAddr":"10.0.0.%[2]d",`+
				`"status":"UP","overriddenStatus":"UNKNOWN","port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,`+
				`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
				`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":1,"lastRenewalTimestamp":1,"evictionTimestamp":0,"serviceUpTimestamp":1},`+
				`"metadata":{"eurekube.io/managed-by":"eurekube","eurekube.io/syncer":"%[4]s"},"vipAddress":"%[1]s","lastUpdatedTimestamp":"1","lastDirtyTimestamp":"1","actionType":"%[5]s"}`,
				strings.ToLower(app), i+1, app, syncer, action))
		}
		appParts = append(appParts, fmt.Sprintf(`{"name":"%s","instance":[%s]}`, app, strings.Join(insts, ",")))
	}
	hashcode := ""
	if total > 0 {
		hashcode = fmt.Sprintf("UP_%d_", total)
	}
	return fmt.Sprintf(`{"applications":{"versions__delta":"1","apps__hashcode":"%s","application":[%s]}}`, hashcode, strings.Join(appParts, ","))
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
	if n := f.wholeReads.Load(); n != 1 {
		t.Fatalf("%d reads of the registry for 2,000 readers, want 1", n)
	}
}

func TestRegistryCache_ReadsAgainOnceTheLastReadIsOlderThanMaxAge(t *testing.T) {
	f := newFakeRegistry(t, map[string][]string{"ORDERS": {"orders"}})
	cache := newCache(t, f.url(), 200*time.Millisecond)
	reads := func() int64 { return f.wholeReads.Load() + f.deltaReads.Load() }
	readAll(cache, 10)
	readAll(cache, 10)
	if n := reads(); n != 1 {
		t.Fatalf("%d reads within maxAge, want 1", n)
	}
	time.Sleep(250 * time.Millisecond)
	readAll(cache, 10)
	if n := reads(); n != 2 {
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
	if n := f.wholeReads.Load(); n != 1 {
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
	if n := f.wholeReads.Load(); n != 1 {
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

func TestRegistryCache_ReadsOnlyTheChangesOnceItHasTheWholeRegistry(t *testing.T) {
	f := newFakeRegistry(t, nil)
	cache := newCache(t, f.url(), 50*time.Millisecond)
	read := func() *eureka.Registry {
		t.Helper()
		time.Sleep(60 * time.Millisecond)
		reg, err := cache.Registry(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	f.set(map[string][]string{"ORDERS": {"orders", "orders"}, "CART": {"cart"}, "STOCK": {"stock"}}, nil)
	first := read()
	f.set(map[string][]string{"ORDERS": {"orders", "orders", "orders"}, "STOCK": {"stock"}}, map[string]map[int]string{"ORDERS": {1: "MODIFIED", 2: "ADDED"}, "CART": {0: "DELETED"}})
	reg := read()
	// A delta changes the state of the apps it names, and only theirs.
	if reg.AppState("orders") == first.AppState("orders") || reg.AppState("cart") == first.AppState("cart") {
		t.Error("the apps the delta named keep their state")
	}
	if reg.AppState("stock") != first.AppState("STOCK") || reg.AppState("nowhere") != first.AppState("nowhere") {
		t.Error("an app no delta named changed state")
	}
	if reg.Len() != 4 || len(reg.Instances("orders")) != 3 || len(reg.Instances("cart")) != 0 {
		t.Fatalf("after a delta: %d instances, orders %d, cart %d; want 4, 3, 0", reg.Len(), len(reg.Instances("orders")), len(reg.Instances("cart")))
	}
	// Eureka's delta lists again every instance registered in its last
	// three minutes: one that lists them as they are changes no state, so
	// no import follows it with a reconcile.
	f.set(map[string][]string{"ORDERS": {"orders", "orders", "orders"}, "STOCK": {"stock"}}, map[string]map[int]string{"ORDERS": {0: "ADDED", 1: "ADDED", 2: "ADDED"}, "STOCK": {0: "ADDED"}})
	again := read()
	if again.AppState("orders") != reg.AppState("orders") || again.AppState("stock") != reg.AppState("stock") {
		t.Error("a delta that lists the instances again as they are changed their app's state")
	}
	if again.Len() != 4 || len(again.Instances("orders")) != 3 {
		t.Fatalf("after the same instances again: %d instances, orders %d; want 4, 3", again.Len(), len(again.Instances("orders")))
	}
	if w, d := f.wholeReads.Load(), f.deltaReads.Load(); w != 1 || d != 2 {
		t.Fatalf("%d whole reads and %d delta reads, want 1 and 2", w, d)
	}
}

func TestRegistryCache_ADeltaThatDoesNotAddUpIsFollowedByAWholeRead(t *testing.T) {
	f := newFakeRegistry(t, map[string][]string{"ORDERS": {"orders"}})
	cache := newCache(t, f.url(), 50*time.Millisecond)
	if _, err := cache.Registry(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Two instances came, but the delta no longer holds one of them (older
	// than what the server keeps): its hashcode says UP_3_, applying it
	// gives UP_2_.
	f.set(map[string][]string{"ORDERS": {"orders", "orders", "orders"}}, map[string]map[int]string{"ORDERS": {2: "ADDED"}})
	time.Sleep(60 * time.Millisecond)
	reg, err := cache.Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if reg.Len() != 3 {
		t.Fatalf("%d instances, want the whole registry's 3", reg.Len())
	}
	if w, d := f.wholeReads.Load(), f.deltaReads.Load(); w != 2 || d != 1 {
		t.Fatalf("%d whole reads and %d delta reads, want 2 and 1", w, d)
	}
}

// Old servers write a lone application (and a lone instance) as an object,
// not an array of one.
func TestRegistry_ReadsALoneApplicationWrittenAsAnObject(t *testing.T) {
	f := newFakeRegistry(t, nil)
	array := appsJSON(map[string][]string{"ORDERS": {"orders"}}, nil)
	lone := strings.NewReplacer(`"application":[`, `"application":`, `"instance":[`, `"instance":`, `}]}]}}`, `}}}}`).Replace(array)
	f.whole.Store(&lone)
	reg, err := newCache(t, f.url(), time.Minute).Registry(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, lone)
	}
	if got := reg.InstancesWithMetadata("orders", map[string]string{eureka.MetaSyncer: "orders"}); len(got) != 1 || got[0].Port != 8080 {
		t.Fatalf("instances %+v", got)
	}
}

// The real server's delta and hashcode are what the cache applies and
// checks: after changes, it reads only the delta, and ends where a whole
// read ends.
func TestRegistryCache_FollowsTheRealServerThroughDeltas(t *testing.T) {
	ops := &opCounter{ops: map[string]int{}}
	c, err := eureka.New(eureka.Options{URLs: []string{realServer(t).URL()}, Timeout: requestTimeout, Observer: ops})
	if err != nil {
		t.Fatal(err)
	}
	stays, goes, comes := testInstance("delta-app", "pod-stays"), testInstance("delta-app", "pod-goes"), testInstance("delta-app", "pod-comes")
	for _, inst := range []eureka.Instance{stays, goes} {
		if err := c.Register(ctx(t), inst); err != nil {
			t.Fatal(err)
		}
	}
	cache := eureka.NewRegistryCache(c, 100*time.Millisecond)
	if _, err := cache.Registry(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx(t), goes.App, goes.InstanceID); err != nil {
		t.Fatal(err)
	}
	comes.Status = eureka.StatusDown
	if err := c.Register(ctx(t), comes); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	got, err := cache.Registry(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.Applications(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if gotIDs, wantIDs := sortedIDs(got.Instances("delta-app")), sortedIDs(want.Instances("delta-app")); gotIDs != wantIDs || got.Len() != want.Len() {
		t.Fatalf("after a delta: %s (%d in all); a whole read: %s (%d in all)", gotIDs, got.Len(), wantIDs, want.Len())
	}
	if down := got.InstancesWithMetadata("delta-app", map[string]string{eureka.MetaPod: "pod-comes"}); len(down) != 1 || down[0].Status != eureka.StatusDown {
		t.Fatalf("the instance that came: %+v", down)
	}
	if got := ops.String(); got != "map[applications:2 cancel:1 delta:1 register:3]" {
		t.Fatalf("requests %s, want the cache's second read to be one delta (and the test's own whole read)", got)
	}
}

func sortedIDs(insts []eureka.Instance) string {
	out := ids(insts)
	sort.Strings(out)
	return strings.Join(out, ",")
}

// TestRegistryCache_OnReadFollowsEachReadOnce: a follower hears of every
// read once, with its outcome, a failed one too, however many readers
// shared it, and not of readers served from the last read.
func TestRegistryCache_OnReadFollowsEachReadOnce(t *testing.T) {
	f := newFakeRegistry(t, map[string][]string{"ORDERS": {"orders"}})
	cache := newCache(t, f.url(), time.Hour)
	var heard atomic.Int64
	cache.OnRead(func(reg *eureka.Registry, err error) {
		if err != nil || len(reg.Instances("orders")) != 1 {
			t.Errorf("the read heard of: %v, %v", reg, err)
		}
		heard.Add(1)
	})
	readAll(cache, 100)
	readAll(cache, 100) // served from the last read
	if n := heard.Load(); n != 1 {
		t.Fatalf("heard of %d reads, want 1", n)
	}
	f.failing.Store(true)
	expired := newCache(t, f.url(), 0) // every reader reads
	expired.OnRead(func(_ *eureka.Registry, err error) {
		if err == nil {
			t.Error("a failed read was heard of without its error")
		}
		heard.Add(1)
	})
	readAll(expired, 1)
	if n := heard.Load(); n != 2 {
		t.Fatalf("a failed read was heard of %d times, want once", n-1)
	}
}
