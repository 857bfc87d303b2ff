package webhook

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/webhook/webhooktest"
)

// Small builders for test fixtures (cert-manager style).

var testDefaults = Defaults{
	RegistrarImage:      "eurekube/registrar:test",
	EurekaURLs:          []string{"http://eureka:8761/eureka"},
	PreStopSleepSeconds: 100,
	ClusterID:           "cluster-uid-1",
	RegistrarPort:       9901,
	RegistrarLogLevel:   "info",
	RegistrarResources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
	},
}

// syncer is the syncer name of namespace shop selecting the Spring pod
// (app=orders), created age before 2026-01-01, with a zone in its
// metadata and the lease the API server defaults, changed by opts.
func syncer(name string, age time.Duration, opts ...builders.SyncerOption) v1alpha1.EurekaSyncer {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age)
	s := builders.Syncer("shop", name, append([]builders.SyncerOption{
		builders.Selecting("orders"), builders.CreatedAt(created), builders.Metadata(map[string]string{"zone": "zone-a"}),
		func(s *v1alpha1.EurekaSyncer) {
			s.Spec.Lease = v1alpha1.Lease{RenewalIntervalSeconds: 30, DurationSeconds: 90}
		},
	}, opts...)...)
	return *s
}

func enabledNamespace() Namespace {
	return Namespace{Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}}
}

// springPod is webhooktest's Spring Boot pod, named as a ReplicaSet names
// it.
func springPod() *corev1.Pod { return webhooktest.SpringBootPod("shop", "orders-7d9f8-abcde") }

// inject runs what the handler runs, without I/O.
func inject(t *testing.T, pod *corev1.Pod, syncers ...v1alpha1.EurekaSyncer) *corev1.Pod {
	t.Helper()
	r := Inject(pod, enabledNamespace(), syncers, testDefaults)
	if r.Denied != "" {
		t.Fatal(r.Denied)
	}
	return r.Pod
}

func withPreStop(hook *corev1.LifecycleHandler) func() *corev1.Pod {
	return func() *corev1.Pod {
		p := springPod()
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: hook}
		return p
	}
}

func hasVolume(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

func opsOf(ops any) string {
	raw, _ := json.Marshal(ops)
	return string(raw)
}

// applyPatch applies ops to raw as the API server does.
func applyPatch(t *testing.T, raw []byte, ops []jsonpatch.Operation) []byte {
	t.Helper()
	patched, err := ApplyPatch(raw, ops)
	if err != nil {
		t.Fatal(err)
	}
	return patched
}

// registrarConfig is what the injected registrar of pod reads from its
// environment, the downward API filled in as the kubelet would.
func registrarConfig(t *testing.T, pod *corev1.Pod) sidecar.Config {
	t.Helper()
	registrar := pod.Spec.Containers[len(pod.Spec.Containers)-1]
	kubelet := map[string]string{ // what the downward API gives
		"metadata.name": "orders-1", "metadata.namespace": "shop", "metadata.uid": "u-1", "status.podIP": "10.0.0.7", "spec.nodeName": "node-1",
	}
	var env []sidecar.EnvVar
	for _, e := range registrar.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, sidecar.EnvVar{Name: e.Name, Value: e.Value})
		case e.ValueFrom.FieldRef != nil:
			env = append(env, sidecar.EnvVar{Name: e.Name, Value: kubelet[e.ValueFrom.FieldRef.FieldPath]})
		default:
			t.Fatalf("env %s: unexpected source %+v", e.Name, e.ValueFrom)
		}
	}
	cfg, err := sidecar.ParseEnv(sidecar.LookupIn(env))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// informerCache is the manager's reader, controller-runtime's informer
// cache, filled from objects instead of an API server: the informers list
// them once and their watch stays quiet. Reads take the path they take in
// the manager.
func informerCache(tb testing.TB, scheme *runtime.Scheme, namespaces []corev1.Namespace, syncers []v1alpha1.EurekaSyncer, claims ...v1alpha1.EurekaAppClaim) cache.Cache {
	tb.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	mapper.Add(v1alpha1.GroupVersion.WithKind("EurekaSyncer"), meta.RESTScopeNamespace)
	mapper.Add(v1alpha1.GroupVersion.WithKind("EurekaAppPolicy"), meta.RESTScopeRoot)
	mapper.Add(v1alpha1.GroupVersion.WithKind("EurekaAppClaim"), meta.RESTScopeRoot)
	lists := func(obj runtime.Object) runtime.Object {
		switch obj.(type) {
		case *corev1.Namespace:
			return &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: namespaces}
		case *v1alpha1.EurekaSyncer:
			return &v1alpha1.EurekaSyncerList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: syncers}
		case *v1alpha1.EurekaAppPolicy:
			return &v1alpha1.EurekaAppPolicyList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
		case *v1alpha1.EurekaAppClaim:
			return &v1alpha1.EurekaAppClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: claims}
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
	for _, obj := range []client.Object{&corev1.Namespace{}, &v1alpha1.EurekaSyncer{}, &v1alpha1.EurekaAppPolicy{}, &v1alpha1.EurekaAppClaim{}} {
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
