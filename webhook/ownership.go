package webhook

import (
	"context"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/ownership"
)

// App ownership at admission: a pod registers under the app of each of its
// registrars (the syncer's, the pod's eurekube.io/app-name, or whatever a
// registrar written by hand says: registrars.go reads them all as the
// kubelet will run them), and only the namespaces the platform's policy
// grants the app to, or its first claimant, may. Where the granting
// policy says elsewhere: Refuse, the webhook reads the app's instances in
// the manager's last read of the registrar's Eureka servers itself, and
// refuses to join an app that has instances no Eurekube of this cluster
// registered and none of this namespace's (the reconciler's rule:
// joining is refused, a namespace already registered beside them keeps
// its rollouts going). It trusts no condition the reconciler may not have
// written yet; when it cannot know, it refuses, saying a retry passes once
// the registry is read.

// Registries reads the manager's registry reads for the webhook: the
// reconciler's own (controller.Registries), so a pod costs no request to
// Eureka beyond the one read per server set and resync.
type Registries interface {
	// Instances are app's instances in the last read of the registry of
	// the servers, credentials and TLS material of syncer s (a syncer of
	// the pod's namespace naming a registrar's servers when no syncer
	// does). An error: no read yet, or Eureka unreachable.
	Instances(ctx context.Context, s *v1alpha1.EurekaSyncer, app string) ([]eureka.Instance, error)
}

// registryWait bounds how long admission waits for a registry read that
// is not there yet; the webhook's own timeout is 5 s.
const registryWait = 2 * time.Second

// checkRegistrars denies r when a container of its pod runs the registrar
// with settings the webhook cannot read, calls a Eureka host the manager
// does not allow, or registers an app its namespace may not (or may not
// join). An unclaimed app is claimed for its first registrant
// (ownership.Checker.Check) unless the request is a dry run.
func (h *Handler) checkRegistrars(ctx context.Context, req admission.Request, namespace string, ns Namespace, r *Result) error {
	if ns.Excluded || r.Denied != "" || r.Pod == nil {
		return nil
	}
	registrars, err := h.images.registrars(r.Pod)
	if err != nil {
		refuse(r, ReasonRegistrarUnreadable, err.Error())
		return nil
	}
	for _, reg := range registrars {
		if err := h.defaults.checkRegistrarHosts(reg); err != nil {
			refuse(r, ReasonEurekaHostNotAllowed, err.Error())
			return nil
		}
	}
	if h.ownership == nil {
		return nil
	}
	dryRun := req.DryRun != nil && *req.DryRun
	checked := make(map[string]bool, 1)
	for _, reg := range registrars {
		app := reg.Settings.AppName
		if checked[app] {
			continue
		}
		checked[app] = true
		v, err := h.ownership.Check(ctx, app, ownership.Namespace{Name: namespace, Labels: ns.Labels}, !dryRun)
		if err != nil {
			return fmt.Errorf("check who may register Eureka app %s: %w", app, err)
		}
		if !v.Allowed {
			refuse(r, ReasonAppNotPermitted, v.Message)
			return nil
		}
		if v.JoinElsewhere {
			continue
		}
		if reason, message := h.checkElsewhere(ctx, namespace, r.Syncer, reg, v); message != "" {
			refuse(r, reason, message)
			return nil
		}
	}
	return nil
}

// checkElsewhere refuses the registrar's app, granted by a policy with
// elsewhere: Refuse (v), when the manager's last read of its servers
// shows instances elsewhere and none of this namespace's, or when there is
// no such read to go by.
func (h *Handler) checkElsewhere(ctx context.Context, namespace string, syncer *v1alpha1.EurekaSyncer, reg registrar, v ownership.Verdict) (Reason, string) {
	if h.registries == nil {
		return ReasonRegistryNotRead, fmt.Sprintf("EurekaAppPolicy %s grants Eureka app %s with elsewhere: Refuse, and this webhook has no registry read to tell whether the app has instances outside this cluster; it cannot admit the pod", v.Policy, v.App)
	}
	servers := serversOf(namespace, syncer, reg, h.defaults.EurekaURLs)
	ctx, cancel := context.WithTimeout(ctx, registryWait)
	defer cancel()
	instances, err := h.registries.Instances(ctx, servers, v.App)
	if err != nil {
		return ReasonRegistryNotRead, fmt.Sprintf("EurekaAppPolicy %s grants Eureka app %s with elsewhere: Refuse, and the manager has not read the registry of %s yet (%v), so it cannot tell whether the app has instances outside this cluster; the pod is refused until it can: a retry passes once the registry is read (the workload's controller retries by itself)",
			v.Policy, v.App, eureka.RedactAll(reg.Settings.EurekaURLs), err)
	}
	if elsewhere, ours := joinsElsewhere(instances, h.defaults.ClusterID, namespace); elsewhere > 0 && ours == 0 {
		verdict := v.RefuseElsewhere(fmt.Sprintf("%d instance(s) elsewhere, none of namespace %s", elsewhere, namespace))
		return ReasonAppNotPermitted, verdict.Message
	}
	return "", ""
}

// joinsElsewhere counts app's instances that no Eurekube of this cluster
// registered (elsewhere: VMs, other clusters), and this cluster's
// instances of namespace (ours): the reconciler's split
// (controller/observe.go), by namespace.
func joinsElsewhere(instances []eureka.Instance, clusterID, namespace string) (elsewhere, ours int) {
	for _, inst := range instances {
		switch {
		case inst.Metadata[eureka.MetaManagedBy] != eureka.ManagedByValue || inst.Metadata[eureka.MetaCluster] != clusterID:
			elsewhere++
		case inst.Metadata[eureka.MetaNamespace] == namespace:
			ours++
		}
	}
	return elsewhere, ours
}

// serversOf is the syncer whose registry read answers for reg: the pod's
// syncer when reg calls its servers (its credentials read them), else one
// of the namespace naming reg's servers, read without credentials.
func serversOf(namespace string, syncer *v1alpha1.EurekaSyncer, reg registrar, defaults []string) *v1alpha1.EurekaSyncer {
	if syncer != nil {
		urls := syncer.Spec.Eureka.ServiceURLs
		if len(urls) == 0 {
			urls = defaults
		}
		if slices.Equal(urls, reg.Settings.EurekaURLs) {
			return syncer
		}
	}
	s := &v1alpha1.EurekaSyncer{}
	s.Namespace = namespace
	if !slices.Equal(reg.Settings.EurekaURLs, defaults) {
		s.Spec.Eureka.ServiceURLs = reg.Settings.EurekaURLs
	}
	return s
}

// refuse turns r into a denial.
func refuse(r *Result, reason Reason, message string) {
	r.Inject, r.Reason, r.Patch = false, reason, nil
	r.Denied = message + "; the pod is not admitted"
}
