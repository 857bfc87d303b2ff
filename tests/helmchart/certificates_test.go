package helmchart

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestCertificates_SelfManagedModeNeedsNoCertManager(t *testing.T) {
	objs := render(t, releaseNamespace, "certificates: {mode: self-managed}\n")

	for _, kind := range []string{"Issuer", "Certificate"} {
		if got := objs.ofKind(kind); len(got) > 0 {
			t.Errorf("self-managed mode renders cert-manager objects: %v", got.names())
		}
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	objs.typed(t, "MutatingWebhookConfiguration", "eurekube", &mwc)
	if a, ok := mwc.Annotations["cert-manager.io/inject-ca-from"]; ok {
		t.Errorf("the webhook configuration still asks cert-manager's CA injector for %q", a)
	}

	var d appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-manager", &d)
	pod := d.Spec.Template.Spec
	args := pod.Containers[0].Args
	for _, want := range []string{
		"--certificate-mode=self-managed",
		"--webhook-configuration=eurekube",
		"--webhook-service=eurekube-webhook",
		"--certificate-secret=eurekube-webhook-tls",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("manager args %q lack %s", args, want)
		}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--cert-dir") {
			t.Errorf("manager args still name %s: no Secret is mounted in self-managed mode", a)
		}
	}
	// Only the projected token for the gateway, no Secret.
	for _, v := range pod.Volumes {
		if v.Secret != nil || v.Projected == nil || len(v.Projected.Sources) != 1 || v.Projected.Sources[0].ServiceAccountToken == nil {
			t.Errorf("self-managed mode mounts volume %s (%+v), want none but the gateway's token (the manager reads the Secret through the API)", v.Name, v.VolumeSource)
		}
	}

	t.Run("the manager may keep its Secret and the caBundle current", func(t *testing.T) {
		var role rbacv1.Role
		objs.typed(t, "Role", "eurekube-certificates", &role)
		if !allows(role.Rules, "", "secrets", "create", "") {
			t.Errorf("Role eurekube-certificates does not allow creating the Secret: %+v", role.Rules)
		}
		for _, verb := range []string{"get", "list", "watch", "update"} {
			if !allows(role.Rules, "", "secrets", verb, "eurekube-webhook-tls") {
				t.Errorf("Role eurekube-certificates does not allow %s on Secret eurekube-webhook-tls: %+v", verb, role.Rules)
			}
			if allows(role.Rules, "", "secrets", verb, "another-secret") {
				t.Errorf("Role eurekube-certificates allows %s on any Secret, want only eurekube-webhook-tls", verb)
			}
		}
		var binding rbacv1.RoleBinding
		objs.typed(t, "RoleBinding", "eurekube-certificates", &binding)
		if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != "eurekube-manager" {
			t.Errorf("RoleBinding eurekube-certificates = %+v, want Role %s bound to ServiceAccount eurekube-manager", binding, role.Name)
		}

		var cr rbacv1.ClusterRole
		objs.typed(t, "ClusterRole", "eurekube-manager", &cr)
		for _, verb := range []string{"get", "list", "watch", "patch"} {
			if !allows(cr.Rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", verb, "eurekube") {
				t.Errorf("ClusterRole eurekube-manager does not allow %s on MutatingWebhookConfiguration eurekube", verb)
			}
			if allows(cr.Rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", verb, "someone-elses") {
				t.Errorf("ClusterRole eurekube-manager allows %s on every MutatingWebhookConfiguration, want only eurekube", verb)
			}
		}
	})

	t.Run("cert-manager mode grants none of it", func(t *testing.T) {
		objs := render(t, releaseNamespace, "")
		if r := objs.find("Role", "eurekube-certificates"); r != nil {
			t.Errorf("cert-manager mode renders %s", key(r))
		}
		var cr rbacv1.ClusterRole
		objs.typed(t, "ClusterRole", "eurekube-manager", &cr)
		if allows(cr.Rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch", "eurekube") {
			t.Error("cert-manager mode lets the manager patch its webhook configuration")
		}
	})
}
