package helmchart

import (
	"reflect"
	"slices"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestUninstall_APreDeleteJobDetachesEverySyncerWhileTheManagerRuns(t *testing.T) {
	objs := render(t, releaseNamespace, "")

	var job batchv1.Job
	objs.typed(t, "Job", "eurekube-uninstall", &job)
	jobWeight := hookWeight(t, job.Annotations)
	hooks := map[string]map[string]string{"Job eurekube-uninstall": job.Annotations}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
		u := objs.get(t, kind, "eurekube-uninstall")
		hooks[key(u)] = u.GetAnnotations()
		// Created before the Job, which runs as them.
		if w := hookWeight(t, u.GetAnnotations()); w >= jobWeight {
			t.Errorf("%s: hook weight %d, want below the Job's %d", key(u), w, jobWeight)
		}
	}
	for k, a := range hooks {
		if a["helm.sh/hook"] != "pre-delete" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("%s: hook %q, delete policy %q, want pre-delete and before-hook-creation,hook-succeeded", k, a["helm.sh/hook"], a["helm.sh/hook-delete-policy"])
		}
	}

	if p := job.Annotations["helm.sh/hook-output-log-policy"]; p != "hook-failed" {
		t.Errorf("the Job's helm.sh/hook-output-log-policy is %q, want hook-failed: a failed uninstall shows the syncers left", p)
	}

	pod := job.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("the Job runs %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if want := []string{"/eurekube", "uninstall", "--timeout=5m"}; !slices.Equal(c.Command, want) {
		t.Errorf("the Job runs %q, want %q", c.Command, want)
	}
	if pod.ServiceAccountName != "eurekube-uninstall" {
		t.Errorf("the Job runs as %q, want its own ServiceAccount eurekube-uninstall", pod.ServiceAccountName)
	}

	var d appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-manager", &d)
	manager := d.Spec.Template.Spec
	if c.Image != manager.Containers[0].Image {
		t.Errorf("the Job runs image %q, want the manager's %q (it carries /eurekube)", c.Image, manager.Containers[0].Image)
	}
	// The manager's pod passes Pod Security restricted (tests/cluster runs
	// it in such a namespace); the Job's has the same contexts.
	if !reflect.DeepEqual(pod.SecurityContext, manager.SecurityContext) {
		t.Errorf("the Job's pod securityContext %s differs from the manager's %s", toYAML(pod.SecurityContext), toYAML(manager.SecurityContext))
	}
	if !reflect.DeepEqual(c.SecurityContext, manager.Containers[0].SecurityContext) {
		t.Errorf("the Job's container securityContext %s differs from the manager's %s", toYAML(c.SecurityContext), toYAML(manager.Containers[0].SecurityContext))
	}

	var role rbacv1.ClusterRole
	objs.typed(t, "ClusterRole", "eurekube-uninstall", &role)
	for _, resource := range []string{"eurekasyncers", "eurekaimports"} {
		for _, verb := range []string{"get", "list", "watch", "delete"} {
			if !allows(role.Rules, "eurekube.io", resource, verb, "any") {
				t.Errorf("ClusterRole eurekube-uninstall does not allow %s on %s: %+v", verb, resource, role.Rules)
			}
		}
	}
	var binding rbacv1.ClusterRoleBinding
	objs.typed(t, "ClusterRoleBinding", "eurekube-uninstall", &binding)
	if binding.RoleRef.Name != "eurekube-uninstall" || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Name != "eurekube-uninstall" || binding.Subjects[0].Namespace != releaseNamespace {
		t.Errorf("ClusterRoleBinding eurekube-uninstall = %s, want the ClusterRole bound to ServiceAccount %s/eurekube-uninstall", toYAML(binding), releaseNamespace)
	}

	t.Run("off with uninstall.detachSyncers false", func(t *testing.T) {
		for _, u := range render(t, releaseNamespace, "uninstall: {detachSyncers: false}\n") {
			if _, ok := u.GetAnnotations()[hookAnnotation]; ok {
				t.Errorf("%s is still a hook", key(u))
			}
		}
	})
}

func hookWeight(t *testing.T, annotations map[string]string) int {
	t.Helper()
	w, err := strconv.Atoi(annotations["helm.sh/hook-weight"])
	if err != nil {
		t.Fatalf("helm.sh/hook-weight %q: %v", annotations["helm.sh/hook-weight"], err)
	}
	return w
}
