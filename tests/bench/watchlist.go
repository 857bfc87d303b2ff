package bench

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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
