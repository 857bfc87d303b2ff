package helmchart

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/eurekube/eurekube/tests/harness"
)

// The write policies bound the ServiceAccount the manager's pods run as,
// whatever the release and its namespace are named, and each can be left
// out. tests/admission shows what they allow and refuse.
func TestValues_TheWritePoliciesBoundTheReleasesManager(t *testing.T) {
	const ns = "platform"
	objs := render(t, ns, "fullnameOverride: acme\n")
	var d appsv1.Deployment
	objs.typed(t, "Deployment", "acme-manager", &d)
	sa := objs.get(t, "ServiceAccount", d.Spec.Template.Spec.ServiceAccountName)

	for _, p := range writePolicies {
		t.Run(p.value, func(t *testing.T) {
			var vap admissionregistrationv1.ValidatingAdmissionPolicy
			objs.typed(t, "ValidatingAdmissionPolicy", "acme-manager-"+p.suffix, &vap)
			want := "request.userInfo.username == 'system:serviceaccount:" + ns + ":" + sa.GetName() + "'"
			if len(vap.Spec.MatchConditions) != 1 || vap.Spec.MatchConditions[0].Expression != want {
				t.Errorf("the policy's matchConditions = %+v, want the one expression %s", vap.Spec.MatchConditions, want)
			}
			if vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("the policy's failurePolicy = %v, want Fail", vap.Spec.FailurePolicy)
			}
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			objs.typed(t, "ValidatingAdmissionPolicyBinding", "acme-manager-"+p.suffix, &b)
			if b.Spec.PolicyName != vap.Name || len(b.Spec.ValidationActions) != 1 || b.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
				t.Errorf("the binding = %s, want policy %s with action Deny", toYAML(b.Spec), vap.Name)
			}
		})

		t.Run(p.value+".enabled=false leaves it out, and only it", func(t *testing.T) {
			var left []string
			for _, u := range render(t, ns, "fullnameOverride: acme\n"+p.value+": {enabled: false}\n") {
				if u.GetObjectKind().GroupVersionKind().Group == admissionregistrationv1.GroupName && u.GetKind() != "MutatingWebhookConfiguration" && boundsWrites(u.GetName()) {
					left = append(left, key(u))
				}
			}
			var want []string
			for _, other := range writePolicies {
				if other != p {
					want = append(want, "ValidatingAdmissionPolicy acme-manager-"+other.suffix, "ValidatingAdmissionPolicyBinding acme-manager-"+other.suffix)
				}
			}
			sort.Strings(left)
			if !slices.Equal(left, want) {
				t.Errorf("rendered %v, want %v", left, want)
			}
		})
	}
}

// writePolicies are the policies bounding the manager's writes: the value
// that leaves each out, and the suffix of its name.
var writePolicies = []struct{ value, suffix string }{
	{"podWritePolicy", "pod-writes"},
	{"importWritePolicy", "import-writes"},
}

// boundsWrites is true for the name of a policy (or binding) among
// writePolicies; the registrar placement policy is not one.
func boundsWrites(name string) bool {
	for _, p := range writePolicies {
		if strings.HasSuffix(name, "-"+p.suffix) {
			return true
		}
	}
	return false
}

// An overlay of manifests/default that sets its own namespace and lists
// manifests/pod-write-policy/namespace, as docs/operations.md says, bounds
// its manager too: both policies name the ServiceAccount in that
// namespace, and the policies and their bindings stay cluster-scoped.
func TestManifests_AnOverlaysNamespaceReachesTheWritePolicies(t *testing.T) {
	const ns = "platform"
	dir := t.TempDir()
	manifests, err := filepath.Rel(dir, filepath.Join(tools.root, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := "namespace: " + ns + "\nresources:\n- " + manifests + "/default\ntransformers:\n- " + manifests + "/pod-write-policy/namespace\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := run(tools.kubectl, "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := harness.DecodeObjects(raw)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(decoded)
	sa := objs.get(t, "ServiceAccount", "eurekube-manager")
	for _, p := range writePolicies {
		var vap admissionregistrationv1.ValidatingAdmissionPolicy
		objs.typed(t, "ValidatingAdmissionPolicy", "eurekube-manager-"+p.suffix, &vap)
		want := "request.userInfo.username == 'system:serviceaccount:" + ns + ":" + sa.GetName() + "'"
		if sa.GetNamespace() != ns || len(vap.Spec.MatchConditions) != 1 || vap.Spec.MatchConditions[0].Expression != want {
			t.Errorf("the ServiceAccount is in %s and %s's matchConditions = %+v, want the one expression %s", sa.GetNamespace(), vap.Name, vap.Spec.MatchConditions, want)
		}
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			if u := objs.get(t, kind, vap.Name); u.GetNamespace() != "" {
				t.Errorf("%s %s has namespace %q: it is cluster-scoped", kind, vap.Name, u.GetNamespace())
			}
		}
	}
}
