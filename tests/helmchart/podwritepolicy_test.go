package helmchart

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
)

// The pod write policy bounds the ServiceAccount the manager's pods run
// as, whatever the release and its namespace are named, and can be left
// out. tests/admission shows what it allows and refuses.
func TestValues_ThePodWritePolicyBoundsTheReleasesManager(t *testing.T) {
	const ns = "platform"
	objs := render(t, ns, "fullnameOverride: acme\n")
	var d appsv1.Deployment
	objs.typed(t, "Deployment", "acme-manager", &d)
	sa := objs.get(t, "ServiceAccount", d.Spec.Template.Spec.ServiceAccountName)

	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	objs.typed(t, "ValidatingAdmissionPolicy", "acme-manager-pod-writes", &vap)
	want := "request.userInfo.username == 'system:serviceaccount:" + ns + ":" + sa.GetName() + "'"
	if len(vap.Spec.MatchConditions) != 1 || vap.Spec.MatchConditions[0].Expression != want {
		t.Errorf("the policy's matchConditions = %+v, want the one expression %s", vap.Spec.MatchConditions, want)
	}
	if vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("the policy's failurePolicy = %v, want Fail", vap.Spec.FailurePolicy)
	}
	var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
	objs.typed(t, "ValidatingAdmissionPolicyBinding", "acme-manager-pod-writes", &b)
	if b.Spec.PolicyName != vap.Name || len(b.Spec.ValidationActions) != 1 || b.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
		t.Errorf("the binding = %s, want policy %s with action Deny", toYAML(b.Spec), vap.Name)
	}

	t.Run("podWritePolicy.enabled=false leaves it out", func(t *testing.T) {
		for _, u := range render(t, ns, "podWritePolicy: {enabled: false}\n") {
			if u.GetObjectKind().GroupVersionKind().Group == admissionregistrationv1.GroupName && u.GetKind() != "MutatingWebhookConfiguration" {
				t.Errorf("rendered %s", key(u))
			}
		}
	})
}
