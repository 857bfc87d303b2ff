package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// Single-instance changes: once the imports are right and their steady
// state measured, one more app is imported, with enough instances for
// several EndpointSlices, and Eureka is changed by one instance at a time,
// as a VM's life changes it. A watch of that import's slices counts the
// writes (creates, updates, deletes: each a new resourceVersion) each
// change causes, until the manager has reconciled every import once more
// after the change reached the import's status.

// changedApp is the app the single-instance changes are made to.
const changedApp = "vm-app-changed"

// changedInstance is the k-th instance of changedApp: 10.200.1.10 and up,
// 200 to a third octet, so that 10.200.0.10 sorts before every one of
// them, as text and as an address.
func changedInstance(k int) eureka.Instance {
	return changedInstanceAt(fmt.Sprintf("10.200.%d.%d", 1+k/200, 10+k%200))
}

// lowInstance is the instance a change adds: its address sorts first.
func lowInstance() eureka.Instance { return changedInstanceAt("10.200.0.10") }

func changedInstanceAt(ip string) eureka.Instance {
	return eureka.Instance{App: strings.ToUpper(changedApp), InstanceID: fmt.Sprintf("%s:%s:%d", ip, changedApp, importInstancePort),
		HostName: ip, IPAddr: ip, VIPAddress: changedApp, Status: eureka.StatusUp, Port: importInstancePort, PortEnabled: true,
		Duration: time.Hour, Metadata: map[string]string{}}
}

// sliceChange is one single-instance change and the writes it caused.
type sliceChange struct {
	// what the change was.
	what string
	// writes of the import's EndpointSlices, by verb.
	writes sliceWrites
	// took: from the change in Eureka until the import's status and
	// slices showed it.
	took time.Duration
}

// sliceWrites counts EndpointSlice writes by verb.
type sliceWrites struct{ creates, updates, deletes int }

func (w sliceWrites) total() int { return w.creates + w.updates + w.deletes }

func (w sliceWrites) sub(before sliceWrites) sliceWrites {
	return sliceWrites{w.creates - before.creates, w.updates - before.updates, w.deletes - before.deletes}
}

func (w sliceWrites) String() string {
	var parts []string
	for _, p := range []struct {
		n    int
		verb string
	}{{w.creates, "create"}, {w.updates, "update"}, {w.deletes, "delete"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.verb))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// importChanges is what the single-instance changes measured.
type importChanges struct {
	// instances of changedApp at first, and the slices its import had
	// then: what a re-cut of every slice writes.
	instances, slices int
	changes           []sliceChange
}

// worst is the change that wrote the most slices.
func (c importChanges) worst() sliceChange {
	var w sliceChange
	for _, ch := range c.changes {
		if ch.writes.total() > w.writes.total() || w.what == "" {
			w = ch
		}
	}
	return w
}

// measureImportChanges imports changedApp with instances instances in the
// first import namespace while the manager runs, then makes each change
// and counts the slice writes it caused. reconciles reads the manager's
// reconciles of imports so far, imports is how many imports there are
// besides changedApp's. It cancels changedApp's instances at the end, so
// that what comes after reads the scenario's registry (the import stays,
// and the manager stops soon after).
func measureImportChanges(ctx context.Context, env *scaleEnv, imports, instances int, reconciles func() (float64, error)) (importChanges, error) {
	res := importChanges{instances: instances}
	ns := importNamespace(0)
	if err := inParallel(ctx, instances, func(k int) error { return env.eureka.Register(ctx, changedInstance(k)) }); err != nil {
		return res, err
	}
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: changedApp}, Spec: v1alpha1.EurekaImportSpec{App: changedApp}}
	if err := env.k8s.Create(ctx, imp); err != nil {
		return res, fmt.Errorf("import %s/%s: %w", ns, changedApp, err)
	}
	w, err := watchSlices(ctx, env, ns, changedApp)
	if err != nil {
		return res, err
	}
	defer w.stop()

	// Every instance ready: the import's status says so (it is written
	// after the slices), and the slices hold them.
	if err := waitChanged(ctx, env, imp, w, instances, instances, "", false); err != nil {
		return res, fmt.Errorf("the import of %d instances: %w", instances, err)
	}
	// Whatever the import's first pass still writes comes before the
	// first change.
	if err := waitReconciled(ctx, reconciles, imports+1); err != nil {
		return res, err
	}
	res.slices = w.count()

	mid := changedInstance(instances / 2)
	cancelled := changedInstance(instances / 3)
	low := lowInstance()
	down := mid
	down.Status = eureka.StatusDown
	steps := []struct {
		what         string
		change       func() error
		ready, total int
		ip           string
		gone         bool
	}{
		{fmt.Sprintf("%s UP → DOWN", mid.IPAddr), func() error { return env.eureka.Register(ctx, down) }, instances - 1, instances, mid.IPAddr, false},
		{fmt.Sprintf("%s DOWN → UP", mid.IPAddr), func() error { return env.eureka.Register(ctx, mid) }, instances, instances, mid.IPAddr, false},
		{fmt.Sprintf("%s added, sorting first", low.IPAddr), func() error { return env.eureka.Register(ctx, low) }, instances + 1, instances + 1, low.IPAddr, false},
		{fmt.Sprintf("%s cancelled", cancelled.IPAddr), func() error { return env.eureka.Cancel(ctx, cancelled.App, cancelled.InstanceID) }, instances, instances, cancelled.IPAddr, true},
	}
	for _, step := range steps {
		before := w.writes()
		began := time.Now()
		if err := step.change(); err != nil {
			return res, fmt.Errorf("%s: %w", step.what, err)
		}
		if err := waitChanged(ctx, env, imp, w, step.ready, step.total, step.ip, step.gone); err != nil {
			return res, fmt.Errorf("%s: %w", step.what, err)
		}
		took := time.Since(began)
		// What the change still causes: the manager reconciles every
		// import once more (each once per resync) after the change
		// reached the import.
		if err := waitReconciled(ctx, reconciles, imports+1); err != nil {
			return res, fmt.Errorf("%s: %w", step.what, err)
		}
		if err := w.failed(); err != nil {
			return res, err
		}
		res.changes = append(res.changes, sliceChange{what: step.what, writes: w.writes().sub(before), took: took})
	}
	return res, cancelChanged(ctx, env, instances)
}

// cancelChanged cancels changedApp's instances, and waits until the
// registry lists none of them.
func cancelChanged(ctx context.Context, env *scaleEnv, instances int) error {
	err := inParallel(ctx, instances+1, func(k int) error {
		inst := lowInstance()
		if k < instances {
			inst = changedInstance(k)
		}
		if err := env.eureka.Cancel(ctx, inst.App, inst.InstanceID); err != nil && !errors.Is(err, eureka.ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cancel the instances of %s: %w", changedApp, err)
	}
	return harness.Poll(ctx, 2*time.Minute, 200*time.Millisecond, "the registry without "+changedApp, func() error {
		reg, err := env.eureka.Applications(ctx)
		if err != nil {
			return err
		}
		if n := len(reg.Instances(strings.ToUpper(changedApp))); n > 0 {
			return fmt.Errorf("it lists %d instances of %s", n, changedApp)
		}
		return nil
	})
}

// waitChanged waits until imp's status reads ready/total endpoints and
// Synced, and its slices hold ip ready as the status says (or, gone,
// no longer hold it; no ip: hold ready endpoints).
func waitChanged(ctx context.Context, env *scaleEnv, imp *v1alpha1.EurekaImport, w *sliceWatch, ready, total int, ip string, gone bool) error {
	want := fmt.Sprintf("%d/%d", ready, total)
	ipReady := ready == total // every step but DOWN leaves every endpoint ready
	return harness.Poll(ctx, 2*time.Minute, 100*time.Millisecond, "the import's status "+want, func() error {
		if err := w.failed(); err != nil {
			return err
		}
		var got v1alpha1.EurekaImport
		if err := env.k8s.Get(ctx, client.ObjectKeyFromObject(imp), &got); err != nil {
			return err
		}
		if got.Status.Endpoints != want || !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionSynced) {
			return fmt.Errorf("status endpoints %q, Synced %v", got.Status.Endpoints, meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionSynced))
		}
		n, isReady, listed := w.endpoints(ip)
		switch {
		case n != total:
			return fmt.Errorf("the slices hold %d endpoints, want %d", n, total)
		case ip == "":
		case gone && listed:
			return fmt.Errorf("the slices still hold %s", ip)
		case !gone && (!listed || isReady != ipReady):
			return fmt.Errorf("the slices hold %s: listed %t, ready %t; want ready %t", ip, listed, isReady, ipReady)
		}
		return nil
	})
}

// waitReconciled waits until the manager has made n more import reconciles
// than when it is called.
func waitReconciled(ctx context.Context, reconciles func() (float64, error), n int) error {
	from, err := reconciles()
	if err != nil {
		return err
	}
	return harness.Poll(ctx, 2*time.Minute, 200*time.Millisecond, fmt.Sprintf("%d more import reconciles", n), func() error {
		now, err := reconciles()
		if err != nil {
			return err
		}
		if now-from < float64(n) {
			return fmt.Errorf("%.0f so far", now-from)
		}
		return nil
	})
}

// sliceWatch keeps the EndpointSlices of one Service, as a watch of them
// from a listed resource version sees them, and counts the writes.
type sliceWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	slices map[string]*discoveryv1.EndpointSlice
	w      sliceWrites
	err    error
}

// watchSlices lists and watches the EndpointSlices of service in ns.
func watchSlices(ctx context.Context, env *scaleEnv, ns, service string) (*sliceWatch, error) {
	wc, err := client.NewWithWatch(env.cp.Config, client.Options{Scheme: env.cp.Scheme})
	if err != nil {
		return nil, fmt.Errorf("watch client: %w", err)
	}
	opts := []client.ListOption{client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: service}}
	var list discoveryv1.EndpointSliceList
	if err := wc.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("list the EndpointSlices of %s/%s: %w", ns, service, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &sliceWatch{cancel: cancel, done: make(chan struct{}), slices: map[string]*discoveryv1.EndpointSlice{}}
	for i := range list.Items {
		s.slices[list.Items[i].Name] = &list.Items[i]
	}
	rv := list.ResourceVersion
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			// A watch the API server ends is started again from the last
			// resource version seen.
			wi, err := wc.Watch(ctx, &discoveryv1.EndpointSliceList{}, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})...)
			if err != nil {
				s.fail(fmt.Errorf("watch the EndpointSlices of %s/%s: %w", ns, service, err))
				return
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					s.fail(fmt.Errorf("watch the EndpointSlices of %s/%s: %v", ns, service, ev.Object))
					wi.Stop()
					return
				}
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
				if slice, ok := ev.Object.(*discoveryv1.EndpointSlice); ok {
					s.note(ev.Type, slice)
				}
			}
			wi.Stop()
		}
	}()
	return s, nil
}

// note records one event: a write, unless it carries the resource version
// already seen.
func (s *sliceWatch) note(t watch.EventType, slice *discoveryv1.EndpointSlice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.slices[slice.Name]
	switch t {
	case watch.Added, watch.Modified:
		if had && old.ResourceVersion == slice.ResourceVersion {
			return
		}
		if had {
			s.w.updates++
		} else {
			s.w.creates++
		}
		s.slices[slice.Name] = slice
	case watch.Deleted:
		if had {
			s.w.deletes++
			delete(s.slices, slice.Name)
		}
	}
}

func (s *sliceWatch) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// failed is why the watch ended, if it did.
func (s *sliceWatch) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *sliceWatch) writes() sliceWrites {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w
}

// count is how many slices there are.
func (s *sliceWatch) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.slices)
}

// endpoints says how many endpoints the slices hold, and whether ip is
// among them and ready.
func (s *sliceWatch) endpoints(ip string) (n int, ready, listed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, slice := range s.slices {
		for _, ep := range slice.Endpoints {
			n++
			if ip != "" && len(ep.Addresses) > 0 && ep.Addresses[0] == ip {
				listed = true
				ready = ep.Conditions.Ready != nil && *ep.Conditions.Ready
			}
		}
	}
	return n, ready, listed
}

func (s *sliceWatch) stop() {
	s.cancel()
	<-s.done
}
