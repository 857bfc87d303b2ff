package eureka

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// Registry is one read of a server's whole registry, indexed by app. It is
// immutable: every method returns copies, so one Registry can serve many
// readers at once.
type Registry struct {
	apps map[string][]Instance // by upper-cased app name
	// versions: each app's AppState, by upper-cased app name.
	versions map[string]uint64
	// hashcode is the server's apps__hashcode of this state (instance
	// counts per status, such as "UP_20000_"), the check Eureka's own
	// client makes after applying a delta.
	hashcode string
	size     int
	// readAt is when the read that produced it finished (zero for one
	// not read through a RegistryCache).
	readAt time.Time
}

// ReadAt is when the read behind this registry finished. What it shows is
// older still by up to ServerCacheDelay: the server answers registry reads
// from a response cache.
func (r *Registry) ReadAt() time.Time { return r.readAt }

// ServerCacheDelay is how old a server's answer to a registry read may be:
// Eureka refreshes its read-only response cache every 30 s by default
// (responseCacheUpdateIntervalMs).
const ServerCacheDelay = 30 * time.Second

// Applications reads the whole registry (GET /apps): one request however
// many apps there are, where Instances costs one per app.
//
// The answer is asked for compressed and decoded after the request (a
// slow decode on a busy machine is not a slow server), one application at
// a time: a registry of twenty thousand instances is some 20 MiB of JSON,
// 1 to 2 MiB compressed, and is never held whole.
func (c *Client) Applications(ctx context.Context) (*Registry, error) {
	asked := c.now()
	body, err := c.getCompressed(ctx, "applications", "/apps")
	if err != nil {
		return nil, fmt.Errorf("read the registry: %w", err)
	}
	reg, err := decodeRegistry(body, asked)
	if err != nil {
		return nil, fmt.Errorf("read the registry: %w", err)
	}
	return reg, nil
}

// getCompressed GETs path asking for a compressed answer, and returns it
// to be decoded after the request, inflated as it is read.
func (c *Client) getCompressed(ctx context.Context, op, path string) (io.Reader, error) {
	var raw []byte
	var gzipped bool
	err := c.exchange(ctx, op, http.MethodGet, path, nil, true, func(a answer) (err error) {
		gzipped = a.gzipped
		raw, err = io.ReadAll(a)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !gzipped {
		return bytes.NewReader(raw), nil
	}
	return gzip.NewReader(bytes.NewReader(raw))
}

// Len is how many instances the registry holds.
func (r *Registry) Len() int { return r.size }

// Instances lists the instances of app (case-insensitive); an unknown app
// is an empty list, as with Client.Instances.
func (r *Registry) Instances(app string) []Instance {
	return append([]Instance(nil), r.apps[strings.ToUpper(app)]...)
}

// AppState stands for one version of an app's instances: two registries
// give equal AppStates for an app only when no read between them changed
// it. A delta read makes a new version only for the apps whose instances
// it changed, as the app's readers see them; a heartbeat is in no delta,
// and a delta that lists an instance again as it was (Eureka's delta
// lists every instance registered in its last three minutes, changed or
// not) changes nothing a reader sees unless its lease's verdict
// (ExpiredLeases) changes. A whole read makes a new version of every app.
// So equal means unchanged, while different may still be the same
// instances read again whole. It keeps nothing of the registry alive.
type AppState struct {
	version uint64
}

// appVersions numbers every version of an app this process reads, so no
// two lists ever share an AppState; 0 is the state of an app with none.
var appVersions atomic.Uint64

// AppState is app's current version (see AppState).
func (r *Registry) AppState(app string) AppState {
	return AppState{version: r.versions[strings.ToUpper(app)]}
}

// Apps lists the apps the registry holds, upper-cased and sorted.
func (r *Registry) Apps() []string {
	out := make([]string, 0, len(r.apps))
	for app, insts := range r.apps {
		if len(insts) > 0 {
			out = append(out, app)
		}
	}
	sort.Strings(out)
	return out
}

// InstancesWithMetadata lists the instances of app whose metadata has every
// key of match with the same value, as Client.InstancesWithMetadata does.
func (r *Registry) InstancesWithMetadata(app string, match map[string]string) []Instance {
	var out []Instance
	for _, inst := range r.apps[strings.ToUpper(app)] {
		if inst.HasMetadata(match) {
			out = append(out, inst)
		}
	}
	return out
}

// add indexes insts by app: one application's list of an answer is kept
// as it is when it is the app's first (as in every answer Eureka writes).
func (r *Registry) add(insts []Instance) {
	r.size += len(insts)
	for i, inst := range insts {
		app := strings.ToUpper(inst.App)
		r.versions[app] = appVersions.Add(1)
		if _, seen := r.apps[app]; !seen && allOf(insts[i:], app) {
			r.apps[app] = insts[i:]
			return
		}
		r.apps[app] = append(r.apps[app], inst)
	}
}

// allOf says whether every instance of insts is of app (upper-cased).
func allOf(insts []Instance, app string) bool {
	for _, inst := range insts {
		if !strings.EqualFold(inst.App, app) {
			return false
		}
	}
	return true
}

// Kinds of change in a delta, as Eureka names them (actionType).
const (
	actionAdded    = "ADDED"
	actionModified = "MODIFIED"
	actionDeleted  = "DELETED"
)

// opDelta is the delta read's name in metrics, and to failover (movesOn).
const opDelta = "delta"

// change is one instance of a delta and what happened to it.
type change struct {
	action   string
	instance Instance
}

// applyDelta reads the changes the server made in the last few minutes
// (GET /apps/delta, a small answer in steady state where GET /apps is the
// whole registry) and applies them to r. ok is false when the result does
// not match the server's apps__hashcode, as when r is older than the
// changes the server keeps (three minutes by default): read the whole
// registry then, as Eureka's own client does.
func (c *Client) applyDelta(ctx context.Context, r *Registry) (next *Registry, ok bool, err error) {
	asked := c.now()
	body, err := c.getCompressed(ctx, opDelta, "/apps/delta")
	if err != nil {
		return nil, false, fmt.Errorf("read the registry's changes: %w", err)
	}
	all, hashcode, err := decodeDelta(body, asked)
	if err != nil {
		// Not an answer this layer reads: the whole registry is.
		return nil, false, nil
	}
	next = r.clone()
	for _, a := range all {
		next.apply(a.app, a.changes)
	}
	next.hashcode = hashcode
	return next, hashcode == reconcileHashcode(next), nil
}

// clone returns a registry sharing r's lists, for apply to replace some.
func (r *Registry) clone() *Registry {
	return &Registry{apps: maps.Clone(r.apps), versions: maps.Clone(r.versions), hashcode: r.hashcode, size: r.size}
}

// apply replaces the list of app by the one changes lead to; the list it
// replaces, which other registries may share, is left as it is. The app
// gets a new AppState unless the new list differs from the old only in
// leases, and judges each the same (sameButLeases).
func (r *Registry) apply(app string, changes []change) {
	if len(changes) == 0 { // an app listed with no change keeps its list, and its AppState
		return
	}
	app = strings.ToUpper(app)
	old := r.apps[app]
	kept := make([]Instance, 0, len(old)+len(changes))
	index := make(map[string]int, len(old))
	for _, inst := range old {
		index[inst.InstanceID] = len(kept)
		kept = append(kept, inst)
	}
	deleted := map[string]bool{}
	for _, ch := range changes {
		id := ch.instance.InstanceID
		switch ch.action {
		case actionDeleted:
			deleted[id] = true
		case actionAdded, actionModified: // the instance as it is now
			delete(deleted, id)
			if i, ok := index[id]; ok {
				kept[i] = newerLease(kept[i], ch.instance)
			} else {
				index[id] = len(kept)
				kept = append(kept, ch.instance)
			}
		}
	}
	out := kept[:0]
	for _, inst := range kept {
		if !deleted[inst.InstanceID] {
			out = append(out, inst)
		}
	}
	r.size += len(out) - len(old)
	if len(out) == 0 {
		delete(r.apps, app)
		delete(r.versions, app)
		return
	}
	r.apps[app] = out
	if !sameButLeases(old, out) {
		r.versions[app] = appVersions.Add(1)
	}
}

// sameButLeases says whether b holds a's instances, in a's order, each as
// it was but for its lease as last shown (LastUpdated, LeaseObservedAt),
// and each lease judged the same (leaseExpired).
func sameButLeases(a, b []Instance) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if leaseExpired(x) != leaseExpired(y) {
			return false
		}
		x.LastUpdated, x.LeaseObservedAt = y.LastUpdated, y.LeaseObservedAt
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// newerLease is changed, the copy of an instance a delta carries, with
// the lease of the copy it replaces when that copy's answer showed its
// lease later. Both answers come from the server's response cache, which
// renewals do not refresh, and each is kept until a change of the
// registry invalidates both: a delta encoded before the last whole read
// names the same changes, and only its leases are older. A copy whose
// answer showed its lease later also shows any registration the other
// shows (a registration is itself a time its answer bounds), so the lease
// kept is the instance's current one.
func newerLease(old, changed Instance) Instance {
	if old.LeaseObservedAt.After(changed.LeaseObservedAt) {
		changed.LastUpdated, changed.LeaseObservedAt = old.LastUpdated, old.LeaseObservedAt
	}
	return changed
}

// reconcileHashcode is Eureka's apps__hashcode of r: the number of
// instances in each status, statuses sorted, as "DOWN_1_UP_20_".
func reconcileHashcode(r *Registry) string {
	counts := map[Status]int{}
	for _, insts := range r.apps {
		for _, inst := range insts {
			counts[inst.Status]++
		}
	}
	statuses := make([]string, 0, len(counts))
	for status := range counts {
		statuses = append(statuses, string(status))
	}
	sort.Strings(statuses)
	var b strings.Builder
	for _, status := range statuses {
		fmt.Fprintf(&b, "%s_%d_", status, counts[Status(status)])
	}
	return b.String()
}
