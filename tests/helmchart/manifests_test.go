package helmchart

import (
	"slices"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/manager"
)

// What may differ between the chart (release eurekube in eurekube-system)
// and manifests/, and why. Everything else of every object must be equal:
// the CRD, RBAC rules, the Deployment (args, env, ports, probes, security
// contexts, volumes, affinity, strategy), the webhook configuration,
// Services, the PodDisruptionBudget and cert-manager's objects.
//
//   - Labels: Helm's own (instance, managed-by, version, helm.sh/chart) are
//     added; every label of manifests/ must still be there, same value.
//   - The Namespace: manifests/ create eurekube-system; Helm installs into
//     the release namespace (helm install --create-namespace) and never owns
//     it, so uninstalling does not delete everything else in it.
//   - Helm hooks (the pre-delete uninstall Job and its RBAC): Helm runs them
//     around a release; kustomize has no such step.
//   - The manager container's imagePullPolicy: a chart value, set
//     explicitly; manifests/ leave Kubernetes' default, which is the same
//     (IfNotPresent) for a tagged image.
//   - The flag naming the credentials ClusterRole and, in self-managed
//     mode, the flags naming the webhook configuration, its Service and the
//     certificate Secret: the chart passes them because those names follow
//     the release name; manifests/ leave the manager's defaults, which are
//     the same names for release eurekube.
var (
	onlyInManifests = map[string]string{
		"Namespace eurekube-system": "Helm installs into the release namespace and never owns it",
	}
	defaultFlags = []string{
		"--credentials-cluster-role=" + v1alpha1.EurekaAccessClusterRole,
		"--webhook-configuration=" + manager.DefaultWebhookConfiguration,
		"--webhook-service=" + manager.DefaultWebhookService,
		"--certificate-secret=" + manager.DefaultCertificateSecret,
	}
)

func TestChart_DefaultValuesInstallWhatManifestsDefaultInstalls(t *testing.T) {
	compareWithManifests(t, "", "default")
}

func TestChart_SelfManagedCertificatesInstallWhatManifestsSelfManagedInstalls(t *testing.T) {
	compareWithManifests(t, "certificates: {mode: "+manager.CertificateModeSelfManaged+"}\n", "self-managed")
}

// compareWithManifests renders the chart with values and fails where it
// differs from manifests/<dir> in more than what may differ (above).
func compareWithManifests(t *testing.T, values, dir string) {
	t.Helper()
	chart := withoutHooks(render(t, releaseNamespace, values))
	manifests := kustomize(t, dir)

	want := map[string]*unstructured.Unstructured{}
	for _, u := range manifests {
		if _, ok := onlyInManifests[key(u)]; !ok {
			want[key(u)] = u
		}
	}
	got := map[string]*unstructured.Unstructured{}
	for _, u := range chart {
		got[key(u)] = u
	}
	if missing, extra := diffKeys(want, got); len(missing)+len(extra) > 0 {
		t.Fatalf("the chart's objects differ from manifests/%s's:\nonly in manifests/%s: %v\nonly in the chart: %v", dir, dir, missing, extra)
	}

	for k, m := range want {
		c := got[k]
		t.Run(k, func(t *testing.T) {
			for name, value := range m.GetLabels() {
				if c.GetLabels()[name] != value {
					t.Errorf("label %s = %q, want %q as in manifests/%s", name, c.GetLabels()[name], value, dir)
				}
			}
			for _, d := range diff("", comparable(m).Object, comparable(c).Object) {
				t.Errorf("differs from manifests/%s at %s", dir, d)
			}
		})
	}
}

// withoutHooks drops Helm's hooks, which run around a release rather than
// being part of it.
func withoutHooks(objs objects) objects {
	var out objects
	for _, u := range objs {
		if _, ok := u.GetAnnotations()[hookAnnotation]; !ok {
			out = append(out, u)
		}
	}
	return out
}

// comparable is a copy of u without what may differ (see above).
func comparable(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	c.SetLabels(nil)
	if c.GetKind() == "Deployment" {
		containers, _, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "containers")
		for _, ctr := range containers {
			ctr := ctr.(map[string]any)
			delete(ctr, "imagePullPolicy")
			if args, ok := ctr["args"].([]any); ok {
				ctr["args"] = slices.DeleteFunc(args, func(a any) bool {
					s, _ := a.(string)
					return slices.Contains(defaultFlags, s)
				})
			}
		}
		_ = unstructured.SetNestedSlice(c.Object, containers, "spec", "template", "spec", "containers")
	}
	return c
}

func diffKeys(want, got map[string]*unstructured.Unstructured) (missing, extra []string) {
	for k := range want {
		if got[k] == nil {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if want[k] == nil {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}
