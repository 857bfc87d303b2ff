package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/webhook"
)

// Permitted: whether the platform allows what a syncer asks for. Two
// checks make it, in this order:
//
//  1. The manager's allowlists (this file): the registrar image and the
//     Eureka hosts the syncer names (webhook.Defaults.CheckAllowed, the
//     webhook's own rule). They are checked before anything else, in
//     observe: a syncer they refuse is not synced at all, so the manager
//     reads none of its Secrets and sends nothing to its servers, not even
//     a registry read.
//  2. App ownership (ownership.go): whether the namespace may register the
//     syncer's app, checked after the registry read, which it needs.
//
// Pods injected before a refusal (the allowlists were added, or the spec
// changed since) keep running as they are: the manager never deletes or
// restarts pods, which would turn a policy change into an outage. The
// condition names them; new pods are refused by the webhook.

// errNotContacted is EurekaReachable's message while the allowlists refuse
// the syncer.
var errNotContacted = errors.New("not contacted: the manager reads nothing from and sends nothing to the Eureka servers of a syncer it does not permit (see the Permitted condition)")

// notAllowed is the Permitted condition, False, when the manager's
// allowlists refuse what syncer s names; nil when they allow it. Its
// message names the field, the value, the flag and the Helm value that
// would allow it, and the pods injected before, which keep running.
func (r *Reconciler) notAllowed(ctx context.Context, s *v1alpha1.EurekaSyncer) (*metav1.Condition, error) {
	err := r.opts.Defaults.CheckAllowed(s)
	var refused *webhook.NotAllowedError
	if !errors.As(err, &refused) {
		return nil, nil
	}
	c := &metav1.Condition{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionFalse, Reason: refused.Reason(),
		Message: refused.Error() + ". New pods are refused"}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingFields{podsBySyncer: s.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	if alive, _ := registrarPodsOf(pods.Items, s.Name); len(alive) > 0 {
		c.Message += fmt.Sprintf("; %d pod(s) injected before keep running as they are, registered by the registrar they were given (Eurekube does not stop them; delete or roll them once the spec is fixed): %s",
			len(alive), names(alive))
	}
	c.Message = truncate(c.Message, 2048)
	return c, nil
}

// withPermitted puts the Permitted condition among cs: a refusal of the
// allowlists replaces whatever else cs says of it; otherwise app
// ownership's verdict among cs stands, and without one the syncer is
// permitted.
func withPermitted(obs *observed, cs []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(cs)+1)
	var ownership *metav1.Condition
	for i := range cs {
		if cs[i].Type == v1alpha1.ConditionPermitted {
			ownership = &cs[i]
			continue
		}
		out = append(out, cs[i])
	}
	switch {
	case obs.notAllowed != nil:
		return append(out, *obs.notAllowed)
	case ownership != nil:
		return append(out, *ownership)
	}
	return append(out, metav1.Condition{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPermitted,
		Message: "the manager allows the registrar image and the Eureka hosts this syncer names"})
}
