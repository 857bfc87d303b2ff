package helmchart

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestChart_EveryNamespaceReferenceFollowsTheReleaseNamespace(t *testing.T) {
	const ns = "platform"
	objs := render(t, ns, "credentialsNamespaces: [shop]\nalerts: {enabled: true}\nmetrics: {serviceMonitor: {enabled: true}}\n")

	t.Run("no object names eurekube-system", func(t *testing.T) {
		for _, u := range objs {
			for _, where := range stringsContaining(u.Object, "", releaseNamespace) {
				t.Errorf("%s still names %s at %s", key(u), releaseNamespace, where)
			}
		}
	})

	t.Run("namespaced objects are in the release namespace", func(t *testing.T) {
		for _, u := range objs {
			if u.GetNamespace() == "" || (u.GetKind() == "RoleBinding" && u.GetNamespace() == "shop") {
				continue
			}
			if u.GetNamespace() != ns {
				t.Errorf("%s: namespace %q, want %q", key(u), u.GetNamespace(), ns)
			}
		}
	})

	t.Run("the webhook calls the release namespace's Service and never sends it", func(t *testing.T) {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		objs.typed(t, "MutatingWebhookConfiguration", "eurekube", &mwc)
		wh := mwc.Webhooks[0]
		if wh.ClientConfig.Service == nil || wh.ClientConfig.Service.Namespace != ns {
			t.Errorf("clientConfig.service = %+v, want namespace %s", wh.ClientConfig.Service, ns)
		}
		if got := notInNamespaces(wh); !slices.Contains(got, ns) || !slices.Contains(got, "kube-system") {
			t.Errorf("namespaceSelector NotIn %v, want %s and kube-system", got, ns)
		}
		if got, want := mwc.Annotations["cert-manager.io/inject-ca-from"], ns+"/eurekube-serving-cert"; got != want {
			t.Errorf("cert-manager.io/inject-ca-from = %q, want %q", got, want)
		}
	})

	t.Run("the serving certificate names the Service in the release namespace", func(t *testing.T) {
		cert := objs.get(t, "Certificate", "eurekube-serving-cert")
		got, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		want := []string{"eurekube-webhook." + ns + ".svc", "eurekube-webhook." + ns + ".svc.cluster.local"}
		if !slices.Equal(got, want) {
			t.Errorf("dnsNames = %v, want %v", got, want)
		}
	})

	t.Run("every binding's ServiceAccount is in the release namespace", func(t *testing.T) {
		for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
			for _, u := range objs.ofKind(kind) {
				var b rbacv1.RoleBinding // a ClusterRoleBinding has the same subjects
				objs.typed(t, kind, u.GetName(), &b)
				for _, s := range b.Subjects {
					if s.Kind == rbacv1.ServiceAccountKind && s.Namespace != ns {
						t.Errorf("%s: subject %s/%s, want namespace %s", key(u), s.Namespace, s.Name, ns)
					}
				}
			}
		}
	})
}

// stringsContaining lists the paths of every string in v that contains s.
func stringsContaining(v any, path, s string) []string {
	switch v := v.(type) {
	case map[string]any:
		var out []string
		for k, e := range v {
			out = append(out, stringsContaining(e, path+"."+k, s)...)
		}
		return out
	case []any:
		var out []string
		for i, e := range v {
			out = append(out, stringsContaining(e, fmt.Sprintf("%s[%d]", path, i), s)...)
		}
		return out
	case string:
		if strings.Contains(v, s) {
			return []string{path}
		}
	}
	return nil
}
