package ownership

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Reasons of a Verdict, also the reasons of the syncer's Permitted
// condition and of the webhook's metrics.
const (
	// ReasonGranted: a policy grants the app to the namespace.
	ReasonGranted = "AppGranted"
	// ReasonClaimed: the app belongs to the namespace by its claim.
	ReasonClaimed = "AppClaimed"
	// ReasonUnclaimed: no policy names the app and no namespace claimed
	// it; the namespace may claim it.
	ReasonUnclaimed = "AppUnclaimed"
	// ReasonNotGranted: policies name the app, none grants it to the
	// namespace.
	ReasonNotGranted = "AppNotGranted"
	// ReasonOwnedElsewhere: another namespace claimed the app first.
	ReasonOwnedElsewhere = "AppOwnedByAnotherNamespace"
	// ReasonElsewhereRefused: the granting policy refuses an app that has
	// instances outside this cluster (see Verdict.JoinElsewhere).
	ReasonElsewhereRefused = "AppHasInstancesElsewhere"
)

// Namespace is what the rule reads of a namespace.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Verdict is whether a namespace may register an app, and why.
type Verdict struct {
	// App is the upper-cased app name.
	App string
	// Allowed is true when the namespace may register the app now.
	Allowed bool
	// NeedsClaim is true when no policy names the app and no claim
	// exists: the namespace may claim it (Checker.Check does).
	NeedsClaim bool
	// Reason is one of the Reason constants.
	Reason string
	// Policy names the granting policy (ReasonGranted), or the policies
	// that name the app (ReasonNotGranted).
	Policy string
	// Owner is the namespace the app belongs to by claim.
	Owner string
	// JoinElsewhere is false when the granting policy refuses an app with
	// instances elsewhere (the reconciler checks, as only it reads
	// Eureka).
	JoinElsewhere bool
	// Message says what decided, naming the policy or the owner, and the
	// fix when refused.
	Message string
}

// Decide says whether namespace ns may register app, given the cluster's
// policies and the app's claim (nil if none). It has no side effects.
func Decide(app string, ns Namespace, policies []v1alpha1.EurekaAppPolicy, claim *v1alpha1.EurekaAppClaim) Verdict {
	app = strings.ToUpper(app)
	v := Verdict{App: app}
	var governing, granting []*v1alpha1.EurekaAppPolicy
	for i := range policies {
		p := &policies[i]
		if !Names(p, app) {
			continue
		}
		governing = append(governing, p)
		if Selects(p, ns) {
			granting = append(granting, p)
		}
	}
	if len(governing) > 0 {
		if len(granting) == 0 {
			v.Reason, v.Policy = ReasonNotGranted, policyNames(governing)
			v.Message = fmt.Sprintf("Eureka app %s is governed by EurekaAppPolicy %s, which does not grant it to namespace %s (%s); ask the platform team to add the namespace to a policy that names the app",
				app, v.Policy, ns.Name, grantees(governing))
			return v
		}
		sort.Slice(granting, func(i, j int) bool { return granting[i].Name < granting[j].Name })
		v.Allowed, v.Reason, v.Policy = true, ReasonGranted, granting[0].Name
		for _, p := range granting {
			if p.Spec.EffectiveElsewhere() == v1alpha1.ElsewhereJoin {
				v.JoinElsewhere, v.Policy = true, p.Name
				break
			}
		}
		v.Message = fmt.Sprintf("EurekaAppPolicy %s grants Eureka app %s to namespace %s", v.Policy, app, ns.Name)
		return v
	}
	v.JoinElsewhere = true
	switch {
	case claim == nil:
		v.Reason, v.NeedsClaim = ReasonUnclaimed, true
		v.Message = fmt.Sprintf("no EurekaAppPolicy names Eureka app %s and no namespace has claimed it: namespace %s may claim it", app, ns.Name)
	case !strings.EqualFold(claim.Spec.App, app):
		// Two app names that map to one claim name: refuse rather than
		// hand one app's claim to another.
		v.Reason, v.Owner = ReasonOwnedElsewhere, claim.Spec.Namespace
		v.Message = fmt.Sprintf("Eureka app %s cannot be claimed: EurekaAppClaim %s holds app %s of namespace %s; ask the platform team for an EurekaAppPolicy that names %s",
			app, claim.Name, claim.Spec.App, claim.Spec.Namespace, app)
	case claim.Spec.Namespace == ns.Name:
		v.Allowed, v.Reason, v.Owner = true, ReasonClaimed, ns.Name
		v.Message = fmt.Sprintf("Eureka app %s belongs to namespace %s (EurekaAppClaim %s)", app, ns.Name, claim.Name)
		if until := HeldUntil(claim); until != "" {
			v.Message += fmt.Sprintf("; the namespace registers it no more, and the claim is held for it until %s: registering it again keeps it", until)
		}
	default:
		v.Reason, v.Owner = ReasonOwnedElsewhere, claim.Spec.Namespace
		v.Message = fmt.Sprintf("Eureka app %s belongs to namespace %s, the first of this cluster to register it (EurekaAppClaim %s); to share it, the platform team grants it to both namespaces with an EurekaAppPolicy",
			app, claim.Spec.Namespace, claim.Name)
		if until := HeldUntil(claim); until != "" {
			v.Message += fmt.Sprintf("; namespace %s registers it no more and the claim is held for it until %s, then the next namespace to register the app claims it", claim.Spec.Namespace, until)
		}
	}
	return v
}

// HeldUntil is when a claim whose namespace registers its app no more
// stops being held for it (its eurekube.io/held-until annotation), "" for
// a claim in use.
func HeldUntil(claim *v1alpha1.EurekaAppClaim) string {
	return claim.Annotations[v1alpha1.ClaimHeldUntilAnnotation]
}

// RefuseElsewhere turns an allowed verdict into a refusal when the app has
// instances elsewhere (VMs, other clusters) and the granting policy
// refuses to join them. elsewhere describes them, for the message.
func (v Verdict) RefuseElsewhere(elsewhere string) Verdict {
	if !v.Allowed || v.JoinElsewhere {
		return v
	}
	v.Allowed, v.Reason = false, ReasonElsewhereRefused
	v.Message = fmt.Sprintf("EurekaAppPolicy %s grants Eureka app %s with elsewhere: Refuse, and the app has instances outside this cluster (%s): nothing new is registered; pick another app name, or ask the platform team to set elsewhere: Join",
		v.Policy, v.App, elsewhere)
	return v
}

// Names is true when one of the policy's app patterns matches app.
func Names(p *v1alpha1.EurekaAppPolicy, app string) bool {
	for _, pattern := range p.Spec.Apps {
		if AppMatches(pattern, app) {
			return true
		}
	}
	return false
}

// AppMatches is true when the app pattern matches app: '*' stands for any
// run of characters, and case does not matter, as Eureka upper-cases app
// names. The one rule for app patterns: an EurekaAppPolicy's apps and an
// EurekaImport's pattern.
func AppMatches(pattern, app string) bool {
	// The CRDs allow letters, digits, '.', '_', '-' and '*' only, so
	// path.Match's other metacharacters never occur.
	ok, err := path.Match(strings.ToUpper(pattern), strings.ToUpper(app))
	return err == nil && ok
}

// Selects is true when the policy grants its apps to namespace ns, by
// name or by label.
func Selects(p *v1alpha1.EurekaAppPolicy, ns Namespace) bool {
	if slices.Contains(p.Spec.Namespaces, ns.Name) {
		return true
	}
	if p.Spec.NamespaceSelector == nil {
		return false
	}
	selector, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
	if err != nil {
		return false // the CRD validates selectors; an invalid one grants nothing
	}
	return selector.Matches(labels.Set(ns.Labels))
}

func policyNames(ps []*v1alpha1.EurekaAppPolicy) string {
	n := make([]string, len(ps))
	for i, p := range ps {
		n[i] = p.Name
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// grantees says whom the policies grant their apps to.
func grantees(ps []*v1alpha1.EurekaAppPolicy) string {
	var parts []string
	for _, p := range ps {
		if len(p.Spec.Namespaces) > 0 {
			parts = append(parts, "namespaces "+strings.Join(p.Spec.Namespaces, ", "))
		}
		if p.Spec.NamespaceSelector != nil {
			parts = append(parts, "namespaces labelled "+metav1.FormatLabelSelector(p.Spec.NamespaceSelector))
		}
	}
	return "it grants it to " + strings.Join(parts, "; ")
}

var notInName = regexp.MustCompile(`[^a-z0-9-]+`)

// ClaimName is the name of app's EurekaAppClaim: the lower-cased app name
// where that is a valid object name, else a name made valid and suffixed
// with a hash of the app name, so that distinct apps get distinct names.
func ClaimName(app string) string {
	app = strings.ToUpper(app)
	name := strings.ToLower(app)
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(app))
	base := strings.Trim(notInName.ReplaceAllString(name, "-"), "-")
	if len(base) > 200 {
		base = base[:200]
	}
	return strings.Trim(base+"-"+hex.EncodeToString(sum[:6]), "-")
}

func upper(app string) string { return strings.ToUpper(app) }

// FirstRegistrant is the namespace of the oldest live syncer among
// syncers that registers app, or fallback when none does: whom an
// unclaimed app is claimed for, so that on an upgrade, where several
// namespaces may register it already, the first keeps it whoever asks
// first. Ownership is earned by registering, never by naming: a syncer
// counts only while it registers something (pods it injected, or
// instances in Eureka) and is not refused (its Permitted condition is not
// False), however old it is.
func FirstRegistrant(syncers []v1alpha1.EurekaSyncer, app, fallback string) string {
	app = strings.ToUpper(app)
	var first *v1alpha1.EurekaSyncer
	for i := range syncers {
		s := &syncers[i]
		if s.DeletionTimestamp != nil || s.EffectiveAppName() != app || !Registers(s) {
			continue
		}
		if first == nil || s.CreationTimestamp.Before(&first.CreationTimestamp) ||
			s.CreationTimestamp.Equal(&first.CreationTimestamp) && s.Namespace+"/"+s.Name < first.Namespace+"/"+first.Name {
			first = s
		}
	}
	if first == nil {
		return fallback
	}
	return first.Namespace
}

// Registers is true when a syncer's last status shows it registering its
// app: pods it injected or instances in Eureka, and no refusal.
func Registers(s *v1alpha1.EurekaSyncer) bool {
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionPermitted); c != nil && c.Status == metav1.ConditionFalse {
		return false
	}
	return s.Status.InjectedPods > 0 || s.Status.RegisteredInstances > 0
}
