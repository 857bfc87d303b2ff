package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

// The hand-written registrar attacks (issue 41): a tenant with edit rights
// in one namespace writes Eurekube's registrar into a pod by hand to
// register, overwrite or cancel an app or an instance that is not its own.

// asTenant is a client acting as a user with edit rights in namespace
// alone, as a team's developer has them: the rules of the edit ClusterRole
// for what the attacks write (envtest runs no controller-manager, which
// aggregates edit's rules, so the test writes them as a Role).
func asTenant(t *testing.T, namespace string) client.Client {
	t.Helper()
	ctx := testContext(t)
	user := "tenant-of-" + namespace
	write := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tenant-edit"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/ephemeralcontainers", "configmaps", "secrets", "services"}, Verbs: write},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets"}, Verbs: write},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tenant-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := suite.c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(suite.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	tenant, err := client.New(cfg, client.Options{Scheme: suite.cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC reaches the authorizer a moment after the binding is written.
	harness.Eventually(t, 30*time.Second, "the tenant's edit rights in "+namespace, func() error {
		var pods corev1.PodList
		return tenant.List(ctx, &pods, client.InNamespace(namespace))
	})
	return tenant
}

// victimApp is an app that namespace owner registered first (its claim),
// with the suite's share-everything policy suspended for the test.
func victimApp(ctx context.Context, t *testing.T) (app, owner string) {
	t.Helper()
	withoutSharedApps(ctx, t)
	app, owner = uniqueApp(t, "orders"), optedInNamespace(ctx, t, "shop")
	if err := suite.c.Create(ctx, builders.Syncer(owner, "orders", builders.AppName(app))); err != nil {
		t.Fatal(err)
	}
	if err := suite.c.Create(ctx, builders.Pod(owner, "orders", builders.Restricted())); err != nil {
		t.Fatalf("the owner's pod: %v", err)
	}
	return app, owner
}

// handWrittenRegistrar is Eurekube's registrar as a tenant copies it into
// a pod: the registrar image, Eurekube's own downward-API identity and
// literal settings of app, then env.
func handWrittenRegistrar(name, app string, env ...corev1.EnvVar) corev1.Container {
	field := func(n, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: n, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
	}
	base := []corev1.EnvVar{
		field(sidecar.EnvPodName, "metadata.name"), field(sidecar.EnvPodNamespace, "metadata.namespace"),
		field(sidecar.EnvPodUID, "metadata.uid"), field(sidecar.EnvPodIP, "status.podIP"),
		{Name: sidecar.EnvAppName, Value: app}, {Name: sidecar.EnvPort, Value: "8080"},
		{Name: sidecar.EnvEurekaURLs, Value: defaultEureka},
	}
	return corev1.Container{Name: name, Image: registrarImage, Env: append(base, env...)}
}

func TestAttack_AHandWrittenRegistrarIsReadAsTheKubeletRunsIt(t *testing.T) {
	requireInjection(t)
	ctx := context.Background()
	app, owner := victimApp(ctx, t)
	evil := optedInNamespace(ctx, t, "evil")
	tenant := asTenant(t, evil)
	own := uniqueApp(t, "evil")
	if err := tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: evil, Name: "settings"},
		Data: map[string]string{sidecar.EnvAppName: app, "APP": app}}); err != nil {
		t.Fatal(err)
	}
	fromConfigMap := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "APP"}}

	for _, attack := range []struct {
		name string
		pod  func(*corev1.Pod)
		// want is in the denial: the owner, or the variable at fault.
		want string
	}{
		{"another container name", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWrittenRegistrar("sidekick", app))
		}, "namespace " + owner},
		{"a native sidecar", func(p *corev1.Pod) {
			c := handWrittenRegistrar("sidekick", app)
			c.RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}, "namespace " + owner},
		{"a plain init container", func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, handWrittenRegistrar("setup", app))
		}, "namespace " + owner},
		{"the app from a ConfigMap after a literal of its own", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWrittenRegistrar(eurekubev1alpha1.RegistrarContainerName, own,
				corev1.EnvVar{Name: sidecar.EnvAppName, ValueFrom: fromConfigMap}))
		}, sidecar.EnvAppName + ": valueFrom configMapKeyRef settings/APP"},
		{"$(VAR) of a ConfigMap's variable", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWrittenRegistrar(eurekubev1alpha1.RegistrarContainerName, "$(APP)"))
			c := &p.Spec.Containers[len(p.Spec.Containers)-1]
			c.Env = append([]corev1.EnvVar{{Name: "APP", ValueFrom: fromConfigMap}}, c.Env...)
		}, sidecar.EnvAppName + ": its value \"$(APP)\" refers to $(APP)"},
		{"envFrom", func(p *corev1.Pod) {
			c := handWrittenRegistrar(eurekubev1alpha1.RegistrarContainerName, "")
			c.Env = c.Env[:4]
			c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}, "envFrom: ConfigMap settings"},
		{"a duplicate pod name: the victim's instance id", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWrittenRegistrar(eurekubev1alpha1.RegistrarContainerName, own,
				corev1.EnvVar{Name: sidecar.EnvPodName, Value: "orders-7d9f8-abcde"}, corev1.EnvVar{Name: sidecar.EnvPodNamespace, Value: owner}))
		}, sidecar.EnvPodName + ": the literal value \"orders-7d9f8-abcde\""},
		{"flags", func(p *corev1.Pod) {
			c := handWrittenRegistrar("sidekick", own)
			c.Args = []string{"-app-name=" + app}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}, "command and args"},
	} {
		t.Run(attack.name, func(t *testing.T) {
			pod := builders.Pod(evil, "evil")
			attack.pod(pod)
			err := tenant.Create(ctx, pod)
			switch {
			case err == nil:
				t.Fatalf("admitted: the pod registers as it pleases (%s)", containerNames(pod))
			case !strings.Contains(err.Error(), attack.want):
				t.Fatalf("refused with %q, want it to name %q", err, attack.want)
			case !strings.Contains(err.Error(), "the pod is not admitted"):
				t.Fatalf("refused with %q, not by the webhook", err)
			}
		})
	}

	// A registrar of the tenant's own app, written as Eurekube writes it,
	// is admitted: the gate reads it, it does not forbid it.
	pod := builders.Pod(evil, "evil")
	pod.Spec.Containers = append(pod.Spec.Containers, handWrittenRegistrar("sidekick", own))
	if err := tenant.Create(ctx, pod); err != nil {
		t.Fatalf("a registrar of the namespace's own app: %v", err)
	}
}

func TestAttack_TheRegistrarImageWhereTheWebhookIsNotCalledIsRefusedByThePolicy(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	const policy = "eurekube-manager-registrar-placement"
	r := renderDefault(t)
	for _, obj := range []*unstructured.Unstructured{
		r.object(t, "ValidatingAdmissionPolicy", policy),
		r.object(t, "ValidatingAdmissionPolicyBinding", policy),
	} {
		obj = obj.DeepCopy()
		if err := suite.c.Create(ctx, obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() { _ = suite.c.Delete(context.Background(), obj) })
	}
	plain := namespace(ctx, t, "never-opted-in", nil)
	optedIn := optedInNamespace(ctx, t, "opted-in")
	app := uniqueApp(t, "anything")
	createSyncer(t, builders.Syncer(optedIn, "svc", builders.AppName(app)))
	tenantPlain, tenantOptedIn := asTenant(t, plain), asTenant(t, optedIn)

	withRegistrar := func(ns, image string, opts ...builders.PodOption) *corev1.Pod {
		p := builders.Pod(ns, "svc", opts...)
		c := handWrittenRegistrar("sidekick", app)
		c.Image = image
		p.Spec.Containers = append(p.Spec.Containers, c)
		return p
	}
	// The policy reaches the API server's admission chain a moment after
	// it is created.
	harness.Eventually(t, 30*time.Second, "the API server enforcing "+policy, func() error {
		err := tenantPlain.Create(ctx, withRegistrar(plain, registrarImage), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), policy) {
			return fmt.Errorf("the registrar in a namespace that never opted in: %v", err)
		}
		return nil
	})
	for _, attack := range []struct {
		name   string
		tenant client.Client
		pod    *corev1.Pod
	}{
		{"a namespace that never opted in", tenantPlain, withRegistrar(plain, "docker.io/eurekube/registrar@sha256:"+strings.Repeat("0", 64))},
		{"opted out by label", tenantOptedIn, withRegistrar(optedIn, "index.docker.io/eurekube/registrar:other", func(p *corev1.Pod) {
			p.Labels[eurekubev1alpha1.InjectLabel] = "false"
		})},
		{"opted out by annotation, with the webhook's own annotations", tenantOptedIn, withRegistrar(optedIn, registrarImage, builders.Annotations(map[string]string{
			eurekubev1alpha1.AnnotationInject: "false", eurekubev1alpha1.StatusAnnotation: eurekubev1alpha1.StatusInjected,
		}))},
	} {
		t.Run(attack.name, func(t *testing.T) {
			err := attack.tenant.Create(ctx, attack.pod)
			switch {
			case err == nil:
				t.Fatal("admitted: the registrar runs where the webhook never reads it")
			case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy):
				t.Fatalf("refused with %q, want refused by %s", err, policy)
			case !strings.Contains(err.Error(), "container sidekick (") || !strings.Contains(err.Error(), "let an EurekaSyncer"):
				t.Fatalf("refused with %q, want the container and the fix named", err)
			}
		})
	}

	// What the policy leaves alone: any other image there, and the pods
	// the webhook injected.
	if err := tenantPlain.Create(ctx, builders.Pod(plain, "svc")); err != nil {
		t.Errorf("a pod without the registrar in a namespace that never opted in: %v", err)
	}
	injected := builders.Pod(optedIn, "svc", builders.Restricted())
	if err := tenantOptedIn.Create(ctx, injected); err != nil {
		t.Fatalf("an injected pod: %v", err)
	}
	if !eurekubev1alpha1.RunsRegistrar(injected) {
		t.Fatalf("the pod came back without the registrar: %v", containerNames(injected))
	}
}

func TestAttack_ASyncerNamingASecretWithoutConsentGetsNoPodAdmitted(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	ns := optedInNamespace(ctx, t, "consent")
	tenant := asTenant(t, ns)
	// Any Secret of the namespace, never meant for Eureka: the same keys
	// as a kubernetes.io/basic-auth Secret.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "database"},
		Type: corev1.SecretTypeBasicAuth, StringData: map[string]string{"username": "db", "password": "s3cret"}}
	if err := tenant.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	createSyncer(t, builders.Syncer(ns, "svc", builders.AppName(uniqueApp(t, "consent")), builders.Credentials("database")))

	pod := builders.Pod(ns, "svc", builders.Restricted())
	err := tenant.Create(ctx, pod)
	switch {
	case err == nil:
		t.Fatalf("admitted with Secret database mounted into the registrar (volumes %v)", pod.Spec.Volumes)
	case !strings.Contains(err.Error(), "Secret "+ns+"/database (spec.eureka.credentialsSecretRef)") ||
		!strings.Contains(err.Error(), eurekubev1alpha1.EurekaCredentialsLabel+"=true"):
		t.Fatalf("refused with %q, want the Secret, the field and the label named", err)
	}

	// Consent given, the same pod is admitted with it.
	secret.Labels = map[string]string{eurekubev1alpha1.EurekaCredentialsLabel: "true"}
	if err := tenant.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	pod = builders.Pod(ns, "svc", builders.Restricted())
	if err := tenant.Create(ctx, pod); err != nil {
		t.Fatalf("with the Secret's consent: %v", err)
	}
	if !eurekubev1alpha1.RunsRegistrar(pod) {
		t.Fatalf("the pod came back without the registrar: %v", containerNames(pod))
	}
}

func TestAttack_ElsewhereRefuseIsDecidedByTheWebhookForEveryApp(t *testing.T) {
	requireInjection(t)
	ctx := context.Background()
	withoutSharedApps(ctx, t)
	ns := optedInNamespace(ctx, t, "joiner", "joiner", "yes")
	app := uniqueApp(t, "vmonly")
	policy := &eurekubev1alpha1.EurekaAppPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(app)},
		Spec: eurekubev1alpha1.EurekaAppPolicySpec{Apps: []string{strings.ToLower(app)},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"joiner": "yes"}},
			Elsewhere:         eurekubev1alpha1.ElsewhereRefuse},
	}
	if err := suite.c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.c.Delete(context.Background(), policy) })
	// Its own app through the syncer, the policy's app through the
	// annotation, and Eureka servers the manager cannot read: at 038bf75
	// the pod was admitted, as no Permitted condition said otherwise.
	createSyncer(t, builders.Syncer(ns, "svc", builders.AppName(uniqueApp(t, "own")), builders.EurekaURLs("http://eureka.corp.example/eureka")))
	tenant := asTenant(t, ns)
	harness.Eventually(t, time.Minute, "the pod refused until the registry is read", func() error {
		err := tenant.Create(ctx, builders.Pod(ns, "svc", builders.Restricted(),
			builders.Annotations(map[string]string{eurekubev1alpha1.AnnotationAppName: strings.ToLower(app)})))
		switch {
		case err == nil:
			return fmt.Errorf("admitted: it joins %s without anyone knowing whether it runs elsewhere", app)
		case !strings.Contains(err.Error(), "EurekaAppPolicy "+policy.Name) || !strings.Contains(err.Error(), "a retry passes once the registry is read"):
			return fmt.Errorf("refused with %q, want the policy named and the retry explained", err)
		}
		return nil
	})
}
