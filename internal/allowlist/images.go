package allowlist

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The manager flag and Helm value that fill each list: named here, their one
// home, so that every refusal says how to allow what it refused.
const (
	// ImagesFlag is the manager flag of the registrar image allowlist.
	ImagesFlag = "allowed-registrar-image"
	// ImagesChartValue is the Helm value that sets ImagesFlag.
	ImagesChartValue = "manager.allowedRegistrarImages"
	// HostsFlag is the manager flag of the Eureka host allowlist.
	HostsFlag = "allowed-eureka-host"
	// HostsChartValue is the Helm value that sets HostsFlag.
	HostsChartValue = "manager.allowedEurekaHosts"
)

// Images is a parsed registrar image allowlist. The zero value allows no
// image.
type Images struct {
	any      bool
	exact    map[string]bool
	prefixes []string // each ends in '/', ':' or '@'
}

// ParseImages parses image patterns (the package doc gives their syntax),
// reporting every bad one at once.
func ParseImages(patterns []string) (Images, error) {
	var l Images
	var errs []error
	for _, p := range patterns {
		switch prefix, wild := strings.CutSuffix(p, "*"); {
		case p == "*":
			l.any = true
		case strings.Contains(prefix, "*"):
			errs = append(errs, fmt.Errorf("%q: a \"*\" may only end the pattern", p))
		case wild && !WellFormedImage(prefix+example(prefix)):
			errs = append(errs, fmt.Errorf("%q: want an image reference prefix ending in \"/\", \":\" or \"@\" before the \"*\", such as registry.example.com/eurekube/*", p))
		case wild:
			l.prefixes = append(l.prefixes, prefix)
		case !WellFormedImage(p):
			errs = append(errs, fmt.Errorf("%q: want an image reference such as registry.example.com/eurekube/registrar:v1, or a prefix ending in \"*\"", p))
		default:
			if l.exact == nil {
				l.exact = map[string]bool{}
			}
			l.exact[p] = true
		}
	}
	if len(errs) > 0 {
		return Images{}, errors.Join(errs...)
	}
	return l, nil
}

// example completes a prefix into a reference, to check that the prefix
// can start one; "" when it does not end where a pattern may.
func example(prefix string) string {
	switch {
	case strings.HasSuffix(prefix, "/"), strings.HasSuffix(prefix, ":"):
		return "x"
	case strings.HasSuffix(prefix, "@"):
		return "sha256:" + strings.Repeat("0", 64)
	}
	return "\x00" // never well-formed
}

// Allows reports whether the list allows image.
func (l Images) Allows(image string) bool {
	if l.any || l.exact[image] {
		return true
	}
	if !WellFormedImage(image) {
		return false
	}
	for _, p := range l.prefixes {
		rest, ok := strings.CutPrefix(image, p)
		// After "repo:" or "repo@" comes a tag or a digest, never a path:
		// registry:* must not allow registry:5000/anything.
		if ok && (strings.HasSuffix(p, "/") || !strings.Contains(rest, "/")) {
			return true
		}
	}
	return false
}

// Patterns is the list as given to ParseImages, in a stable order, for
// logs and messages.
func (l Images) Patterns() []string {
	var out []string
	if l.any {
		out = append(out, "*")
	}
	for p := range l.exact {
		out = append(out, p)
	}
	for _, p := range l.prefixes {
		out = append(out, p+"*")
	}
	slices.Sort(out)
	return out
}

// imageReference is the grammar of a container image reference
// (github.com/distribution/reference): [domain[:port]/]path[:tag][@digest].
var imageReference = func() *regexp.Regexp {
	domainComponent := `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	domain := `(?:` + domainComponent + `(?:\.` + domainComponent + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
	pathComponent := `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
	name := `(?:` + domain + `/)?` + pathComponent + `(?:/` + pathComponent + `)*`
	tag := `[\w][\w.-]{0,127}`
	digest := `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	return regexp.MustCompile(`^` + name + `(?::` + tag + `)?(?:@` + digest + `)?$`)
}()

// WellFormedImage reports whether image is a container image reference a
// runtime would pull, so that no odd spelling slips under a prefix.
func WellFormedImage(image string) bool {
	return len(image) <= 512 && imageReference.MatchString(image)
}
