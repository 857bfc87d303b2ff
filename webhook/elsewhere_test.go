package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/internal/ownership"
)

// registriesAnswer is a Registries that answers the same for every app.
type registriesAnswer struct {
	instances []eureka.Instance
	err       error
	asked     []string
}

func (r *registriesAnswer) Instances(_ context.Context, _ *v1alpha1.EurekaSyncer, app string) ([]eureka.Instance, error) {
	r.asked = append(r.asked, app)
	return r.instances, r.err
}

// gatedHandler is the handler over namespace shop, its syncer orders,
// a policy granting PAYMENTS (and ORDERS) to shop with elsewhere: Refuse,
// and objects (Secrets).
func gatedHandler(t *testing.T, registries Registries, objects ...client.Object) *Handler {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	s := syncer("orders", time.Hour, builders.Credentials("eureka-login"))
	policy := &v1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: "payments"},
		Spec: v1alpha1.EurekaAppPolicySpec{Apps: []string{"payments", "orders"}, Namespaces: []string{"shop"}, Elsewhere: v1alpha1.ElsewhereRefuse}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append([]client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: enabledNamespace().Labels}}, &s, policy,
	}, objects...)...).Build()
	return NewHandler(Options{Reader: reader, Defaults: testDefaults, Ownership: &ownership.Checker{Reader: reader}, Registries: registries})
}

// consented is the syncer's Secret, with or without consent.
func consented(yes bool) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "eureka-login"}}
	if yes {
		s.Labels = map[string]string{v1alpha1.EurekaCredentialsLabel: "true"}
	}
	return s
}

func create(t *testing.T, h *Handler, pod *corev1.Pod) admission.Response {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req-1", Operation: admissionv1.Create, Namespace: "shop",
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw},
	}})
}

func vm(app string) eureka.Instance {
	return eureka.Instance{App: app, InstanceID: "vm-1:" + app, Metadata: map[string]string{}}
}

func ours(app, namespace string) eureka.Instance {
	return eureka.Instance{App: app, InstanceID: "pod:" + app, Metadata: map[string]string{
		eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: testDefaults.ClusterID, eureka.MetaNamespace: namespace}}
}

func TestHandler_ElsewhereRefuseIsDecidedForEveryAppFromTheRegistryRead(t *testing.T) {
	annotated := func() *corev1.Pod {
		p := springPod()
		p.Annotations = map[string]string{v1alpha1.AnnotationAppName: "payments"}
		return p
	}
	for name, tc := range map[string]struct {
		registries *registriesAnswer
		pod        func() *corev1.Pod
		want       string // in the denial; "" when admitted
	}{
		"the syncer's app has instances only on VMs": {&registriesAnswer{instances: []eureka.Instance{vm("ORDERS")}}, springPod,
			"EurekaAppPolicy payments grants Eureka app ORDERS with elsewhere: Refuse"},
		"the annotation's app has instances only on VMs": {&registriesAnswer{instances: []eureka.Instance{vm("PAYMENTS")}}, annotated,
			"Eureka app PAYMENTS with elsewhere: Refuse"},
		"beside the namespace's own instances: its rollouts go on": {&registriesAnswer{instances: []eureka.Instance{vm("ORDERS"), ours("ORDERS", "shop")}}, springPod, ""},
		"another namespace's instances are not the namespace's own": {&registriesAnswer{instances: []eureka.Instance{vm("ORDERS"), ours("ORDERS", "other")}}, springPod,
			"none of namespace shop"},
		"no instance anywhere": {&registriesAnswer{}, springPod, ""},
		"no registry read: refused until there is one": {&registriesAnswer{err: errors.New("connection refused")}, springPod,
			"a retry passes once the registry is read"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := create(t, gatedHandler(t, tc.registries, consented(true)), tc.pod())
			switch {
			case tc.want == "" && !resp.Allowed:
				t.Fatalf("denied: %s", resp.Result.Message)
			case tc.want != "" && resp.Allowed:
				t.Fatalf("admitted, want denied with %q", tc.want)
			case tc.want != "" && !strings.Contains(resp.Result.Message, tc.want):
				t.Fatalf("denied with %q, want %q", resp.Result.Message, tc.want)
			}
		})
	}
}

func TestHandler_DeniesAPodWhoseSyncerNamesASecretWithoutConsent(t *testing.T) {
	none := &registriesAnswer{}
	resp := create(t, gatedHandler(t, none, consented(false)), springPod())
	if resp.Allowed || !strings.Contains(resp.Result.Message, "Secret shop/eureka-login (spec.eureka.credentialsSecretRef)") ||
		!strings.Contains(resp.Result.Message, "kubectl -n shop label secret eureka-login "+v1alpha1.EurekaCredentialsLabel+"=true") {
		t.Fatalf("response %+v, want denied naming the Secret and the label", resp.Result)
	}
	if len(resp.Patches) > 0 || len(resp.Patch) > 0 {
		t.Fatal("a denied pod carries a patch")
	}
	if resp := create(t, gatedHandler(t, none), springPod()); resp.Allowed || !strings.Contains(resp.Result.Message, "does not exist") {
		t.Fatalf("a missing Secret: %+v, want denied saying so", resp.Result)
	}
	if resp := create(t, gatedHandler(t, none, consented(true)), springPod()); !resp.Allowed {
		t.Fatalf("with consent: %s", resp.Result.Message)
	}
}
