package webhook

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/sidecar"
)

// The compiled selectors are kept by content: every selector answers as
// EurekaSyncer.Selects does, the same object edited in place included.
func TestSelects_AnswersAsTheSyncerDoesForEverySelectorContent(t *testing.T) {
	pod := map[string]string{"app": "orders", "tier": "web"}
	s := builders.Syncer("shop", "orders")
	for _, sel := range []metav1.LabelSelector{
		{MatchLabels: map[string]string{"app": "orders"}},
		{MatchLabels: map[string]string{"app": "billing"}},
		{MatchLabels: map[string]string{"app": "orders", "tier": "web"}},
		{MatchLabels: map[string]string{"app": "orders", "tier": "db"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "db"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web", "db"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Bogus"}}},
		{MatchLabels: map[string]string{"app": "not a value!"}},
		{},
		{MatchLabels: map[string]string{"app": "orders"}},
	} {
		s.Spec.Selector = sel // edited in place, as a test or a caller may
		want, wantErr := s.Selects(pod)
		for range 2 { // compiled, then kept
			got, err := selects(s, pod)
			if got != want || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("selector %+v: selects = %v, %v; EurekaSyncer.Selects = %v, %v", sel, got, err, want, wantErr)
			}
		}
	}
}

// Two selectors have one key only when they have one content.
func TestSelectorKey_TellsContentsApart(t *testing.T) {
	keys := map[string]metav1.LabelSelector{}
	for _, sel := range []metav1.LabelSelector{
		{},
		{MatchLabels: map[string]string{"a": "bc"}},
		{MatchLabels: map[string]string{"ab": "c"}},
		{MatchLabels: map[string]string{"a": "1:b"}},
		{MatchLabels: map[string]string{"a": "b", "c": "d"}},
		{MatchLabels: map[string]string{"a": "b"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "c", Operator: metav1.LabelSelectorOpExists}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "c", Operator: metav1.LabelSelectorOpExists}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "c", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "c", Operator: metav1.LabelSelectorOpIn, Values: []string{"y", "x"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "c", Operator: metav1.LabelSelectorOpIn, Values: []string{"x"}}, {Key: "y", Operator: metav1.LabelSelectorOpExists}}},
	} {
		k := selectorKey(&sel)
		if other, seen := keys[k]; seen {
			t.Fatalf("%+v and %+v share the key %q", other, sel, k)
		}
		keys[k] = sel
	}
}

// The registrar's verdict on an environment is kept, and is
// sidecar.ParseInjected's, a refusal included, on every call.
func TestRegistrarAccepts_IsTheRegistrarsVerdictEveryTime(t *testing.T) {
	good := sidecar.Defaults("ORDERS", 8080)
	good.EurekaURLs = []string{"http://eureka:8761/eureka"}
	bad := good
	bad.Port = 70000
	for _, s := range []sidecar.Config{good, bad, good} {
		rendered := s.Env()
		_, want := sidecar.ParseInjected(rendered)
		for range 2 {
			err := registrarAccepts(rendered)
			if (err == nil) != (want == nil) || err != nil && !strings.HasSuffix(err.Error(), want.Error()) {
				t.Fatalf("registrarAccepts = %v; sidecar.ParseInjected: %v", err, want)
			}
		}
	}
	if _, err := sidecar.ParseInjected(bad.Env()); err == nil {
		t.Fatal("port 70000 accepted: the test needs a refused environment")
	}
}

// Two environments have one key only when they are the same.
func TestEnvKey_TellsEnvironmentsApart(t *testing.T) {
	keys := map[string][]sidecar.EnvVar{}
	for _, env := range [][]sidecar.EnvVar{
		nil,
		{{Name: "A", Value: "BC"}},
		{{Name: "AB", Value: "C"}},
		{{Name: "A", Value: "1:B"}},
		{{Name: "A", Value: ""}, {Name: "B", Value: ""}},
		{{Name: "A", Value: "0:"}},
		{{Name: "B", Value: ""}, {Name: "A", Value: ""}},
	} {
		k := string(appendEnvKey(nil, env))
		if other, seen := keys[k]; seen {
			t.Fatalf("%v and %v share the key %q", other, env, k)
		}
		keys[k] = env
	}
}

// Two container environments have one key only when readEnv reads them
// alike: a value and a fieldRef of the same strings, an API version and
// none, are apart; a valueFrom beside a value is not read; one with any
// other valueFrom has no key.
func TestContainerEnvKey_TellsEnvironmentsApart(t *testing.T) {
	field := func(apiVersion, path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: apiVersion, FieldPath: path}}
	}
	keys := map[string][]corev1.EnvVar{}
	for _, env := range [][]corev1.EnvVar{
		nil,
		{{Name: "A", Value: "BC"}},
		{{Name: "AB", Value: "C"}},
		{{Name: "A", Value: "1:B"}},
		{{Name: "A"}, {Name: "B"}},
		{{Name: "B"}, {Name: "A"}},
		{{Name: "A", Value: "metadata.name"}},
		{{Name: "A", ValueFrom: field("", "metadata.name")}},
		{{Name: "A", ValueFrom: field("v1", "metadata.name")}},
		{{Name: "A", ValueFrom: field("", "v1metadata.name")}},
		{{Name: "A", ValueFrom: field("", "metadata.name")}, {Name: "B", Value: "x"}},
	} {
		k, ok := appendContainerEnvKey(nil, env)
		if !ok {
			t.Fatalf("%v has no key", env)
		}
		if other, seen := keys[string(k)]; seen {
			t.Fatalf("%v and %v share the key %q", other, env, k)
		}
		keys[string(k)] = env
	}
	value, _ := appendContainerEnvKey(nil, []corev1.EnvVar{{Name: "A", Value: "x"}})
	beside, _ := appendContainerEnvKey(nil, []corev1.EnvVar{{Name: "A", Value: "x", ValueFrom: field("", "metadata.name")}})
	if !bytes.Equal(value, beside) {
		t.Errorf("a valueFrom beside a value changes the key: %q, %q", value, beside)
	}
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}
	both := field("", "metadata.name")
	both.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}
	for _, from := range []*corev1.EnvVarSource{secret, both, {}} {
		if k, ok := appendContainerEnvKey(nil, []corev1.EnvVar{{Name: "A", ValueFrom: from}}); ok {
			t.Errorf("valueFrom %+v has the key %q: want none", from, k)
		}
	}
}

// A registrar's environment is read as readEnv reads it, from the cache
// or not, a refusal included, on every call.
func TestReadEnvOnce_IsReadEnvEveryTime(t *testing.T) {
	injected := v1alpha1.RegistrarContainer(inject(t, springPod(), syncer("orders", time.Hour))).Env
	refused := append(slices.Clone(injected), corev1.EnvVar{Name: sidecar.EnvPort, Value: "70000"})
	unknown := append(slices.Clone(injected), corev1.EnvVar{Name: sidecar.EnvAppName, Value: "$(NOPE)"})
	noIdentity := slices.Clone(injected[1:])
	credentials := append(slices.Clone(injected), corev1.EnvVar{Name: sidecar.EnvEurekaPassword, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "eureka"}, Key: "password"}}})
	for _, env := range [][]corev1.EnvVar{injected, refused, unknown, noIdentity, credentials, injected} {
		want := readEnv(env)
		for range 2 { // read, then kept
			if got := readEnvOnce(env); !reflect.DeepEqual(got, want) {
				t.Fatalf("readEnvOnce = %+v; readEnv: %+v", got, want)
			}
		}
	}
	if v := readEnvOnce(injected); !v.ok || v.settings.AppName != "ORDERS" {
		t.Fatalf("the injected registrar: %+v, want read, app ORDERS", v)
	}
	for _, env := range [][]corev1.EnvVar{refused, unknown, noIdentity} {
		if v := readEnvOnce(env); v.ok || v.why == "" {
			t.Fatalf("%+v: want a refusal saying why", v)
		}
	}
}

// ownHosts is allowlist.HostsOf for every list of servers, one changed in
// place after it was parsed included.
func TestOwnHosts_IsHostsOfEveryList(t *testing.T) {
	urls := []string{"http://eureka:8761/eureka"}
	for _, list := range [][]string{urls, {"http://eureka-0:8761/eureka", "https://eureka.example.com/eureka"}, urls, nil, {}, urls} {
		if got, want := ownHosts(list), allowlist.HostsOf(list); !reflect.DeepEqual(got, want) {
			t.Fatalf("ownHosts(%q) = %+v; allowlist.HostsOf: %+v", list, got, want)
		}
	}
	urls[0] = "http://other:8761/eureka"
	if got, want := ownHosts(urls), allowlist.HostsOf(urls); !reflect.DeepEqual(got, want) {
		t.Fatalf("the list changed in place: ownHosts = %+v; allowlist.HostsOf: %+v", got, want)
	}
}

// semanticEqual answers as equality.Semantic.DeepEqual for every pair of
// containers and volumes of the bench pod before and after injection, and
// for every pair of their fields, nil against empty and quantities
// written two ways included.
func TestSemanticEqual_IsEqualitySemantic(t *testing.T) {
	before := springPod()
	after := Inject(before, enabledNamespace(), []v1alpha1.EurekaSyncer{syncer("orders", time.Hour)}, testDefaults).Pod
	containers := append(append([]corev1.Container{}, before.Spec.Containers...), after.Spec.Containers...)
	emptied := *before.Spec.Containers[0].DeepCopy()
	emptied.Env, emptied.Ports = []corev1.EnvVar{}, nil
	requotes := *before.Spec.Containers[0].DeepCopy()
	requotes.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}
	requotes2 := *requotes.DeepCopy()
	requotes2.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	containers = append(containers, emptied, requotes, requotes2, corev1.Container{})
	compare := func(x, y reflect.Value) {
		t.Helper()
		if got, want := semanticEqual(x, y), equality.Semantic.DeepEqual(x.Interface(), y.Interface()); got != want {
			t.Fatalf("%s: semanticEqual = %v, equality.Semantic = %v\n%#v\n%#v", x.Type(), got, want, x.Interface(), y.Interface())
		}
	}
	for i := range containers {
		for j := range containers {
			x, y := reflect.ValueOf(&containers[i]).Elem(), reflect.ValueOf(&containers[j]).Elem()
			compare(x, y)
			for f := range x.NumField() {
				compare(x.Field(f), y.Field(f))
			}
		}
	}
	volumes := append(append([]corev1.Volume{}, before.Spec.Volumes...), after.Spec.Volumes...)
	for i := range volumes {
		for j := range volumes {
			compare(reflect.ValueOf(&volumes[i]).Elem(), reflect.ValueOf(&volumes[j]).Elem())
		}
	}
}

// injectedAppName is InjectedSettings' app name, from the cache or not.
func TestInjectedAppName_IsInjectedSettingsApp(t *testing.T) {
	injected := inject(t, springPod(), syncer("orders", time.Hour))
	noEnv := injected.DeepCopy()
	v1alpha1.RegistrarContainer(noEnv).Env = nil
	for _, pod := range []*corev1.Pod{injected, injected, springPod(), noEnv} {
		s, wantOK := InjectedSettings(pod)
		app, ok := injectedAppName(pod)
		if app != s.AppName || ok != wantOK {
			t.Fatalf("injectedAppName = %q, %v; InjectedSettings: %q, %v", app, ok, s.AppName, wantOK)
		}
	}
	if app, ok := injectedAppName(injected); !ok || app != "ORDERS" {
		t.Fatalf("injectedAppName = %q, %v: want ORDERS", app, ok)
	}
}

// encodeValue writes every string as json.Marshal does, the ones it
// quotes itself and the ones it leaves to the encoder.
func TestEncodeValue_StringsAreTheirJSON(t *testing.T) {
	for _, s := range []string{"", "add", "/metadata/annotations/eurekube.io~1status", "a b", "a<b", "a&b", `say "hi"`, `back\slash`, "tab\t", "naïve", "\x7f", "\u2028"} {
		var buf bytes.Buffer
		if err := encodeValue(&buf, json.NewEncoder(&buf), s); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s)
		if got := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
			t.Errorf("encodeValue(%q) = %s, json.Marshal: %s", s, got, want)
		}
	}
}
