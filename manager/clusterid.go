package manager

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeSystemUID is the default cluster id: the UID of the kube-system
// namespace is unique per cluster and lives as long as the cluster, so two
// clusters sharing one Eureka never take each other's instances for orphans.
// It is read once, without a cache, before the manager starts.
func kubeSystemUID(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (string, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return "", fmt.Errorf("cluster id: API client: %w", err)
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ns); err != nil {
		return "", fmt.Errorf("cluster id: read the UID of namespace kube-system (grant get on namespaces, or set --cluster-id): %w", err)
	}
	return string(ns.UID), nil
}
