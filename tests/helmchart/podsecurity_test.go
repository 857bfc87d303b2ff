package helmchart

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Pod Security `restricted` without fixed UIDs: a platform that gives
// each namespace its own UIDs (OpenShift's restricted-v2 SCC) refuses a
// pod that asks for another, and assigns one to a pod that asks for none.
// Eurekube's images run as a numeric non-root user (tests/images), so
// runAsNonRoot holds without a runAsUser.

// shippedRendering is one way Eurekube's objects reach a cluster.
type shippedRendering struct {
	name string
	objs objects
}

// chartValuesShipped are the chart's values whose workloads the tests
// walk: the defaults and each value that adds or changes a pod.
var chartValuesShipped = []struct{ name, values string }{
	{"defaults", ""},
	{"every option on", everythingOn},
	{"self-managed certificates", "certificates: {mode: self-managed}\n"},
	{"without the gateway", "gateway: {enabled: false}\n"},
}

// shippedRenderings is every directory of manifests/ with a
// kustomization.yaml, built by kubectl kustomize, and the chart rendered
// with each of chartValuesShipped (hooks included): a directory or a
// template added later is walked too.
func shippedRenderings(t *testing.T) []shippedRendering {
	t.Helper()
	var out []shippedRendering
	manifests := filepath.Join(tools.root, "manifests")
	err := filepath.WalkDir(manifests, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
			return err
		}
		dir, err := filepath.Rel(manifests, filepath.Dir(path))
		if err != nil {
			return err
		}
		out = append(out, shippedRendering{"manifests/" + dir, kustomize(t, dir)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range chartValuesShipped {
		out = append(out, shippedRendering{"chart, " + v.name, render(t, releaseNamespace, v.values)})
	}
	return out
}

// podSpecAt is a pod spec found in an object, and where in it.
type podSpecAt struct {
	object, path string
	spec         corev1.PodSpec
}

func (p podSpecAt) String() string { return p.object + " at " + p.path }

// podSpecs finds every pod spec in objs, whatever the kind and wherever
// it sits (a Deployment's spec.template.spec, a Job's, a CronJob's
// spec.jobTemplate…): any map whose containers field is a list.
func podSpecs(t *testing.T, objs objects) []podSpecAt {
	t.Helper()
	var out []podSpecAt
	var object string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["containers"].([]any); ok {
				var spec corev1.PodSpec
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(v, &spec); err != nil {
					t.Fatalf("%s at %s: a pod spec that does not decode: %v", object, path, err)
				}
				out = append(out, podSpecAt{object, path, spec})
				return
			}
			for k, e := range v {
				walk(e, path+"."+k)
			}
		case []any:
			for i, e := range v {
				walk(e, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	for _, u := range objs {
		object = key(u)
		walk(u.Object, "")
	}
	return out
}

// fixedIDs lists where spec fixes a user or a group: runAsUser or
// runAsGroup of the pod or of any container, or the pod's fsGroup.
func fixedIDs(spec corev1.PodSpec) []string {
	var out []string
	if sc := spec.SecurityContext; sc != nil {
		for name, id := range map[string]*int64{"runAsUser": sc.RunAsUser, "runAsGroup": sc.RunAsGroup, "fsGroup": sc.FSGroup} {
			if id != nil {
				out = append(out, fmt.Sprintf("securityContext.%s %d", name, *id))
			}
		}
	}
	for _, c := range allContainers(spec) {
		if sc := c.SecurityContext; sc != nil {
			for name, id := range map[string]*int64{"runAsUser": sc.RunAsUser, "runAsGroup": sc.RunAsGroup} {
				if id != nil {
					out = append(out, fmt.Sprintf("container %s: securityContext.%s %d", c.Name, name, *id))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// allContainers are the init, regular and ephemeral containers of spec,
// as one kind.
func allContainers(spec corev1.PodSpec) []corev1.Container {
	out := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for _, e := range spec.EphemeralContainers {
		out = append(out, corev1.Container(e.EphemeralContainerCommon))
	}
	return out
}

// The UIDs restricted-v2 would give the release namespace (OpenShift
// annotates each namespace with a range of 10,000).
const (
	namespaceUIDMin = 1000680000
	namespaceUIDMax = 1000689999
)

// restrictedV2 is what OpenShift's restricted-v2 SCC does to a pod's
// users: it refuses a runAsUser or fsGroup outside the namespace's range,
// and gives every container without a runAsUser the range's first UID and
// the pod without an fsGroup that one. The rest of restricted-v2 (no
// privilege escalation, capabilities dropped, seccomp) is what Pod
// Security restricted asks too.
func restrictedV2(spec corev1.PodSpec) (corev1.PodSpec, error) {
	outside := func(id *int64) bool { return id != nil && (*id < namespaceUIDMin || *id > namespaceUIDMax) }
	sc := ptr.Deref(spec.SecurityContext, corev1.PodSecurityContext{})
	if outside(sc.RunAsUser) || outside(sc.FSGroup) {
		return spec, fmt.Errorf("unable to validate against any security context constraint: pod runAsUser/fsGroup %v/%v not in the namespace's range [%d, %d]",
			ptr.Deref(sc.RunAsUser, -1), ptr.Deref(sc.FSGroup, -1), namespaceUIDMin, namespaceUIDMax)
	}
	for _, c := range allContainers(spec) {
		if c.SecurityContext != nil && outside(c.SecurityContext.RunAsUser) {
			return spec, fmt.Errorf("unable to validate against any security context constraint: container %s runAsUser %d not in the namespace's range [%d, %d]",
				c.Name, *c.SecurityContext.RunAsUser, namespaceUIDMin, namespaceUIDMax)
		}
	}
	out := *spec.DeepCopy()
	if out.SecurityContext == nil {
		out.SecurityContext = &corev1.PodSecurityContext{}
	}
	out.SecurityContext.FSGroup = ptr.To(ptr.Deref(out.SecurityContext.FSGroup, namespaceUIDMin))
	assign := func(cs []corev1.Container) {
		for i := range cs {
			if cs[i].SecurityContext == nil {
				cs[i].SecurityContext = &corev1.SecurityContext{}
			}
			cs[i].SecurityContext.RunAsUser = ptr.To(ptr.Deref(cs[i].SecurityContext.RunAsUser, ptr.Deref(out.SecurityContext.RunAsUser, namespaceUIDMin)))
		}
	}
	assign(out.InitContainers)
	assign(out.Containers)
	return out, nil
}

// No pod spec that Eurekube ships, in any kustomize directory or chart
// rendering, fixes a user or a group, and restricted-v2 takes each.
// TestChart_TheAPIServerTakesEveryObjectAndPodSecurityRestrictedAdmitsItsPods
// has Pod Security restricted admit them, as shipped and as restricted-v2
// makes them.
func TestShipped_NoWorkloadFixesAUserOrGroup(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range shippedRenderings(t) {
		for _, p := range podSpecs(t, r.objs) {
			seen[p.object] = true
			if ids := fixedIDs(p.spec); len(ids) > 0 {
				t.Errorf("%s: %s fixes %s; leave them unset (the image's USER is numeric)", r.name, p, strings.Join(ids, ", "))
			}
			if _, err := restrictedV2(p.spec); err != nil {
				t.Errorf("%s: %s: restricted-v2 refuses it: %v", r.name, p, err)
			}
			if sc := p.spec.SecurityContext; sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) {
				t.Errorf("%s: %s: the pod's runAsNonRoot is not true; without a runAsUser it is what keeps root out", r.name, p)
			}
		}
	}
	// Not vacuous: the walk found the workloads there are.
	for _, want := range []string{"Deployment eurekube-system/eurekube-manager", "Deployment eurekube-system/eurekube-gateway", "Job eurekube-system/eurekube-uninstall"} {
		if !seen[want] {
			t.Errorf("no pod spec of %s found; found %v", want, seen)
		}
	}

	// And the check itself catches what it is for.
	fixed := corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)},
		Containers: []corev1.Container{{Name: "c", SecurityContext: &corev1.SecurityContext{RunAsGroup: ptr.To[int64](65532)}}}}
	if ids := fixedIDs(fixed); len(ids) != 2 {
		t.Errorf("fixedIDs of a pod fixing runAsUser and a container's runAsGroup: %v", ids)
	}
	if _, err := restrictedV2(fixed); err == nil {
		t.Errorf("restricted-v2 took a pod fixing runAsUser 65532")
	}
}
