package controller

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/ownership"
)

// The I/O behind an import's address rule (import_addresses.go): the
// ranges, the running pods by IP from the manager's cache, and whether a
// namespace may register the app, a dry run of the ownership rule that
// never claims.

const (
	// reasonAddressesAllowed: no instance was left out for its address.
	reasonAddressesAllowed = "AddressesAllowed"
	// reasonRangesUnknown: the cluster's ranges could not be read; the
	// endpoints are kept as last written.
	reasonRangesUnknown = "ClusterRangesUnknown"
)

// importRefusedInstances counts what each import left out for its
// address.
var importRefusedInstances = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "eurekube_import_instances_refused",
	Help: "Instances an import left out because their address is inside this cluster (its pod or Service ranges, a running pod's IP) and not a pod of a namespace that may register the app (the AddressesAllowed condition names them).",
}, []string{"namespace", "import"})

func init() { metrics.Registry.MustRegister(importRefusedInstances) }

// setRefusedMetric publishes how many instances an import left out.
func setRefusedMetric(namespace, imp string, n int) {
	importRefusedInstances.WithLabelValues(namespace, imp).Set(float64(n))
}

// forgetRefusedMetric drops the series of an import that is gone.
func forgetRefusedMetric(namespace, imp string) {
	importRefusedInstances.DeleteLabelValues(namespace, imp)
}

// importAddressRule is an import's address rule, and why
// includeThisCluster was refused when it was asked for and is not.
type importAddressRule struct {
	addressRule
	includeRefusal string
}

// addressRule reads what imp's address rule needs: the ranges and the
// verdict on imp's own namespace now (an error keeps the endpoints as
// they are), the pods and their namespaces' verdicts as the rule asks (a
// read that fails then refuses the address: it fails closed).
func (r *importReconciler) addressRule(ctx context.Context, imp *v1alpha1.EurekaImport) (importAddressRule, error) {
	ranges, err := r.ranges.ranges(ctx)
	if err != nil {
		return importAddressRule{}, err
	}
	app := imp.EffectiveApp()
	checker := ownership.Checker{Reader: r.client, Indexed: r.appIndexed}
	verdicts := map[string]ownership.Verdict{}
	var firstErr error
	verdict := func(namespace string) ownership.Verdict {
		if v, ok := verdicts[namespace]; ok {
			return v
		}
		v, err := r.mayRegister(ctx, checker, app, namespace)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if v.Allowed && v.Reason == ownership.ReasonUnclaimed {
			// Free to claim is not owning: an app no policy names and no pod
			// of this cluster registered reaches no pod of the cluster, or a
			// tenant could register any free name at another's pod IP and
			// import it.
			v.Allowed = false
			v.Message = fmt.Sprintf("no namespace owns Eureka app %s: no EurekaAppPolicy names it and no pod of this cluster registered it", app)
		}
		verdicts[namespace] = v
		return v
	}
	rule := importAddressRule{addressRule: addressRule{
		ranges: ranges,
		podsAt: func(addr netip.Addr) []clusterPod {
			var pods corev1.PodList
			if err := r.client.List(ctx, &pods, client.MatchingFields{podsByIP: addr.String()}, client.UnsafeDisableDeepCopy); err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("list pods at %s: %w", addr, err)
				}
				return nil
			}
			out := make([]clusterPod, 0, len(pods.Items))
			for _, p := range pods.Items {
				out = append(out, clusterPod{namespace: p.Namespace, name: p.Name})
			}
			return out
		},
		mayRegister: func(namespace string) bool { return verdict(namespace).Allowed },
	}}
	if imp.Spec.IncludeThisCluster {
		v := verdict(imp.Namespace)
		rule.includeThisCluster = v.Allowed
		if !v.Allowed {
			rule.includeRefusal = fmt.Sprintf("namespace %s may not register %s itself (%s)", imp.Namespace, app, v.Message)
		}
	}
	return rule, firstErr
}

// mayRegister is the ownership rule's verdict on namespace registering
// app, without claiming it.
func (r *importReconciler) mayRegister(ctx context.Context, checker ownership.Checker, app, namespace string) (ownership.Verdict, error) {
	var ns corev1.Namespace
	if err := r.client.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return ownership.Verdict{}, fmt.Errorf("read namespace %s: %w", namespace, err)
	}
	v, err := checker.Check(ctx, app, ownership.Namespace{Name: ns.Name, Labels: ns.Labels}, false)
	if err != nil {
		return ownership.Verdict{}, fmt.Errorf("may namespace %s register %s: %w", namespace, app, err)
	}
	return v, nil
}
