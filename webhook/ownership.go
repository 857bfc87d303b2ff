package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/ownership"
)

// App ownership at admission: a pod that would run the registrar registers
// under the app its registrar is given (the syncer's, or the pod's
// eurekube.io/app-name), and only the namespaces the platform's policy
// grants the app to, or its first claimant, may. Checked on the pod that
// would be admitted, so the syncer, an annotation and a pod written by hand
// with the registrar (Eurekube's own output sent back) pass the same gate.

// checkOwnership denies r when its pod would register an app that its
// namespace may not. An unclaimed app is claimed for its first registrant
// (ownership.Checker.Check) unless the request is a dry run.
func (h *Handler) checkOwnership(ctx context.Context, req admission.Request, namespace string, ns Namespace, r *Result) error {
	if h.ownership == nil || r.Denied != "" || r.Pod == nil || !v1alpha1.RunsRegistrar(r.Pod) {
		return nil
	}
	app, ok := injectedAppName(r.Pod)
	if !ok || app == "" {
		return nil // a registrar whose settings cannot be read would not start
	}
	dryRun := req.DryRun != nil && *req.DryRun
	v, err := h.ownership.Check(ctx, app, ownership.Namespace{Name: namespace, Labels: ns.Labels}, !dryRun)
	if err != nil {
		return fmt.Errorf("check who may register Eureka app %s: %w", app, err)
	}
	if !v.Allowed {
		refuse(r, ReasonAppNotPermitted, v.Message)
		return nil
	}
	// The syncer's Permitted condition, set by the reconciler from the same
	// rule, tells what only the reconciler knows: the app's instances
	// elsewhere, which the granting policy may refuse to join.
	if s := r.Syncer; s != nil && s.EffectiveAppName() == v.App {
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionPermitted)
		if c != nil && c.Status == metav1.ConditionFalse && c.Reason == ownership.ReasonElsewhereRefused && c.ObservedGeneration == s.Generation {
			refuse(r, ReasonAppNotPermitted, fmt.Sprintf("EurekaSyncer %s: %s", s.Name, c.Message))
		}
	}
	return nil
}

// refuse turns r into a denial.
func refuse(r *Result, reason Reason, message string) {
	r.Inject, r.Reason, r.Patch = false, reason, nil
	r.Denied = message + "; the pod is not admitted"
}
