package webhook

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// informerCache is the manager's reader, controller-runtime's informer
// cache, filled from objects instead of an API server: the informers list
// them once and their watch stays quiet. Reads take the path they take in
// the manager.
func informerCache(tb testing.TB, scheme *runtime.Scheme, namespaces []corev1.Namespace, syncers []v1alpha1.EurekaSyncer) cache.Cache {
	tb.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	mapper.Add(v1alpha1.GroupVersion.WithKind("EurekaSyncer"), meta.RESTScopeNamespace)
	lists := func(obj runtime.Object) runtime.Object {
		switch obj.(type) {
		case *corev1.Namespace:
			return &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: namespaces}
		case *v1alpha1.EurekaSyncer:
			return &v1alpha1.EurekaSyncerList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: syncers}
		}
		tb.Fatalf("informerCache: no objects of %T", obj)
		return nil
	}
	c, err := cache.New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{
		Scheme:           scheme,
		Mapper:           mapper,
		DefaultTransform: cache.TransformStripManagedFields(),
		NewInformer: func(_ toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
			lw := &toolscache.ListWatch{
				ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return lists(obj), nil },
				WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
			}
			return toolscache.NewSharedIndexInformer(listThenWatch{lw}, obj, resync, indexers)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	for _, obj := range []client.Object{&corev1.Namespace{}, &v1alpha1.EurekaSyncer{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			tb.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		tb.Fatal("informer cache did not sync")
	}
	return c
}

// listThenWatch lists, then watches: the fake has no streaming list
// (WatchList), which client-go's reflectors use by default.
type listThenWatch struct{ *toolscache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
