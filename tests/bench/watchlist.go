package bench

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// watchListPods does what the manager's pod informer does first, and says
// how long it took: a streaming watch-list of every pod (sendInitialEvents,
// as client-go's reflector asks since WatchListClient became its default),
// in protobuf, until the API server marks the end of its initial events.
func watchListPods(ctx context.Context, cfg *rest.Config, want int) (time.Duration, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, fmt.Errorf("clientset: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	began := time.Now()
	w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		return 0, fmt.Errorf("watch-list the pods: %w", err)
	}
	defer w.Stop()
	pods := 0
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added:
			pods++
		case watch.Error:
			return 0, fmt.Errorf("watch-list the pods: %v", ev.Object)
		case watch.Bookmark:
			m, err := meta.Accessor(ev.Object)
			if err != nil || m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
				continue
			}
			took := time.Since(began)
			if pods < want {
				return 0, fmt.Errorf("watch-list the pods: %d initial pods, want %d", pods, want)
			}
			return took, nil
		}
	}
	return 0, fmt.Errorf("watch-list the pods: the watch ended after %d pods, before the end of its initial events", pods)
}

// watchers are watches whose events are read, and counted, until stop.
type watchers struct {
	names  []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
	events atomic.Int64
}

// watchAll opens a watch of every object of each of lists' kinds, in every
// namespace, from now on, as an informer's watch after its first list (in
// protobuf where the kind has it), and reads their events until stop. What
// was there before is not sent: the manager's informers start on an empty
// store of these kinds.
func watchAll(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, lists ...client.ObjectList) (*watchers, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("watching client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watchers{cancel: cancel}
	for _, list := range lists {
		name := strings.TrimSuffix(reflect.TypeOf(list).Elem().Name(), "List")
		// From the list's resource version: a watch without one would
		// first send every object already there.
		if err := c.List(ctx, list, client.Limit(1)); err != nil {
			w.stop()
			return nil, fmt.Errorf("list %s: %w", name, err)
		}
		m, err := meta.ListAccessor(list)
		if err != nil {
			w.stop()
			return nil, err
		}
		wi, err := c.Watch(ctx, list, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: m.GetResourceVersion(), AllowWatchBookmarks: true}})
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("watch %s: %w", name, err)
		}
		w.names = append(w.names, name)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer wi.Stop()
			for {
				select {
				case ev, ok := <-wi.ResultChan():
					if !ok {
						return
					}
					if ev.Type != watch.Bookmark {
						w.events.Add(1)
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return w, nil
}

// kinds names the kinds watched.
func (w *watchers) kinds() []string { return w.names }

// stop closes the watches and says how many events they received.
func (w *watchers) stop() int {
	w.cancel()
	w.wg.Wait()
	return int(w.events.Load())
}
