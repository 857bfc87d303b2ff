package helmchart

import (
	"regexp"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// The registrar placement policy recognises the registrar's repository as
// the webhook does: a registry's domain in any case, Docker Hub by each of
// its names, any tag or digest; and nothing else.
func TestValues_TheRegistrarPlacementPolicyKnowsTheRegistrarInEverySpelling(t *testing.T) {
	objs := render(t, releaseNamespace, "registrar: {image: {repository: ghcr.io/acme/registrar}}\nregistrarPlacementPolicy: {extraRepositories: [eurekube/registrar]}\n")
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	objs.typed(t, "ValidatingAdmissionPolicy", "eurekube-manager-registrar-placement", &vap)
	if len(vap.Spec.Variables) == 0 || vap.Spec.Variables[0].Name != "registrarImages" {
		t.Fatalf("variables %+v, want registrarImages first", vap.Spec.Variables)
	}
	// A CEL list of single-quoted strings, \\ standing for \.
	list := strings.Trim(strings.TrimSpace(vap.Spec.Variables[0].Expression), "[]")
	var res []*regexp.Regexp
	for _, quoted := range strings.Split(list, ", ") {
		res = append(res, regexp.MustCompile(strings.ReplaceAll(strings.Trim(quoted, "'"), `\\`, `\`)))
	}
	matches := func(image string) bool {
		for _, re := range res {
			if re.MatchString(image) {
				return true
			}
		}
		return false
	}
	for _, image := range []string{
		"ghcr.io/acme/registrar:v1", "GHCR.IO/acme/registrar", "ghcr.io/acme/registrar@sha256:abc",
		"eurekube/registrar:v2", "docker.io/eurekube/registrar", "INDEX.DOCKER.IO/eurekube/registrar:x", "registry-1.docker.io/eurekube/registrar",
	} {
		if !matches(image) {
			t.Errorf("%s is the registrar, and the policy does not know it (%v)", image, res)
		}
	}
	for _, image := range []string{"ghcr.io/acme/registrar-tools:v1", "ghcr.io/acme/app", "evil.io/eurekube/registrar", "eurekube/registrarx"} {
		if matches(image) {
			t.Errorf("%s is not the registrar, and the policy takes it for it", image)
		}
	}
}
