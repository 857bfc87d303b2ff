package controller_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/tests/harness"
)

// BenchmarkReconcile1000 is one reconcile of a syncer selecting 1,000 pods
// with 1,000 registered instances: the cached pod list, one Eureka list,
// the orphan check and the status comparison.
func BenchmarkReconcile1000(b *testing.B) {
	ctx := context.Background()
	ns := newNamespace(b)
	s := newSyncer(b, ns, "catalog", server.URL())
	c := directClient(b, server.URL())
	for i := range 1000 {
		pod := newPod(b, ns, "catalog", fmt.Sprintf("catalog-%04d", i), true, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))
		register(b, c, s, pod)
	}
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	r := controller.NewReconciler(mgr, controller.Options{ClusterID: clusterID, ResyncPeriod: resync, Logger: log})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: s.Name}}
	harness.Eventually(b, 30*resync, "the cache holds the 1,000 pods", func() error {
		if _, err := r.Reconcile(ctx, req); err != nil {
			return err
		}
		got, err := getSyncer(s)
		if err != nil || got.Status.SelectedPods != 1000 || got.Status.RegisteredInstances != 1000 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
