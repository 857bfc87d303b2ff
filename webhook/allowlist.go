package webhook

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/allowlist"
)

// Allowlists are what a syncer may name beyond the manager's own registrar
// image (Defaults.RegistrarImage) and Eureka servers (the hosts and ports
// of Defaults.EurekaURLs), which are always allowed. The zero value allows
// nothing more: writing a syncer then runs no other image in the pods it
// selects and reaches no other host.
type Allowlists struct {
	// RegistrarImages (--allowed-registrar-image) are the other images
	// spec.sidecar.image may name.
	RegistrarImages allowlist.Images
	// EurekaHosts (--allowed-eureka-host) are the other hosts
	// spec.eureka.serviceURLs may name.
	EurekaHosts allowlist.Hosts
}

// Refusal is one value of a syncer's spec that the allowlists do not allow.
type Refusal struct {
	// Reason is v1alpha1.ReasonRegistrarImageNotAllowed or
	// v1alpha1.ReasonEurekaHostNotAllowed.
	Reason string
	// Field is the path of the value in the syncer, such as
	// spec.eureka.serviceURLs[1].
	Field string
	// Value is the image, or the URL's host:port: never the URL, which may
	// carry a password.
	Value string
}

// NotAllowedError says which values of a syncer's spec the manager's
// allowlists do not allow, and how the platform team would allow them.
type NotAllowedError struct {
	// Syncer is the syncer's name.
	Syncer string
	// Refusals are in the order of the spec: the image, then each URL.
	Refusals []Refusal
}

func (e *NotAllowedError) Error() string {
	parts := make([]string, len(e.Refusals))
	for i, r := range e.Refusals {
		switch r.Reason {
		case v1alpha1.ReasonRegistrarImageNotAllowed:
			parts[i] = fmt.Sprintf("%s %q is not an allowed registrar image (it would run in every pod the syncer selects; allow it with the manager's --%s, Helm value %s, or remove the field to use the manager's own image)",
				r.Field, r.Value, allowlist.ImagesFlag, allowlist.ImagesChartValue)
		default:
			parts[i] = fmt.Sprintf("%s names host %s, not an allowed Eureka host (allow it with the manager's --%s, Helm value %s, or remove spec.eureka.serviceURLs to use the manager's --eureka-url)",
				r.Field, r.Value, allowlist.HostsFlag, allowlist.HostsChartValue)
		}
	}
	return fmt.Sprintf("EurekaSyncer %s asks for what this Eurekube does not allow: %s", e.Syncer, strings.Join(parts, "; "))
}

// Reason is the Permitted condition's reason: the first refusal's.
func (e *NotAllowedError) Reason() string {
	return e.Refusals[0].Reason
}

// CheckAllowed returns a *NotAllowedError when syncer s names a registrar
// image or a Eureka host that the manager does not allow: not its own, and
// not in d.Allowed. The webhook refuses the pods of such a syncer and the
// reconciler contacts none of its servers.
func (d Defaults) CheckAllowed(s *v1alpha1.EurekaSyncer) error {
	var refusals []Refusal
	if image := s.Spec.Sidecar.Image; image != "" && image != d.RegistrarImage && !d.Allowed.RegistrarImages.Allows(image) {
		refusals = append(refusals, Refusal{Reason: v1alpha1.ReasonRegistrarImageNotAllowed, Field: "spec.sidecar.image", Value: image})
	}
	if urls := s.Spec.Eureka.ServiceURLs; len(urls) > 0 {
		own := ownHosts(d.EurekaURLs)
		for i, u := range urls {
			if !own.AllowsURL(u) && !d.Allowed.EurekaHosts.AllowsURL(u) {
				refusals = append(refusals, Refusal{Reason: v1alpha1.ReasonEurekaHostNotAllowed,
					Field: fmt.Sprintf("spec.eureka.serviceURLs[%d]", i), Value: allowlist.HostOf(u)})
			}
		}
	}
	if len(refusals) == 0 {
		return nil
	}
	return &NotAllowedError{Syncer: s.Name, Refusals: refusals}
}

// refuseNotAllowed turns an injection into the denial of err, a
// *NotAllowedError: the pod would run an image or call a host the platform
// has not allowed.
func refuseNotAllowed(r Result, err error) Result {
	r.Inject, r.Err, r.Denied = false, err, err.Error()
	r.Reason = ReasonEurekaHostNotAllowed
	if e, ok := err.(*NotAllowedError); ok && e.Reason() == v1alpha1.ReasonRegistrarImageNotAllowed {
		r.Reason = ReasonRegistrarImageNotAllowed
	}
	return r
}

// ownHosts is allowlist.HostsOf(urls), the hosts of the manager's own
// Eureka servers (Defaults.EurekaURLs), parsed again only when urls
// change: the webhook checks the servers of every registrar it admits
// against them (checkRegistrarHosts), and a syncer's and the gateway
// token's servers too, and parsing the manager's URLs for each pod was
// half of that check's time.
func ownHosts(urls []string) allowlist.Hosts {
	if last := lastOwnHosts.Load(); last != nil && slices.Equal(last.urls, urls) {
		return last.hosts
	}
	hosts := allowlist.HostsOf(urls)
	lastOwnHosts.Store(&parsedHosts{urls: slices.Clone(urls), hosts: hosts})
	return hosts
}

// lastOwnHosts is what ownHosts parsed last: a manager has one list of
// servers, so one is kept.
var lastOwnHosts atomic.Pointer[parsedHosts]

// parsedHosts are the hosts of urls (read only: shared by every caller).
type parsedHosts struct {
	urls  []string
	hosts allowlist.Hosts
}
