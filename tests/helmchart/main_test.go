package helmchart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/tests/harness"
)

// The release the one source of truth test renders: with this name and
// namespace the chart names every object as manifests/ does.
const (
	releaseName      = "eurekube"
	releaseNamespace = "eurekube-system"
)

// tools are the binaries every test runs, found once by TestMain.
var tools struct {
	helm, kubectl string
	root          string // the repository
}

func TestMain(m *testing.M) {
	harness.SkipSuiteWhenShort("the helm command (tests/tools/helm/build.sh) and kubectl (tests/tools/envtest/build.sh), built from their Go modules")
	if err := findTools(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func findTools() error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	tools.root = root
	// The Makefile exports EUREKUBE_HELM; without it the script builds or
	// finds the cached binary.
	if tools.helm, err = harness.BuildArtifact("EUREKUBE_HELM", "tests/tools/helm/build.sh"); err != nil {
		return err
	}
	assets, err := harness.BuildArtifact("KUBEBUILDER_ASSETS", "tests/tools/envtest/build.sh")
	if err != nil {
		return err
	}
	tools.kubectl = filepath.Join(assets, "kubectl")
	return nil
}

// chartDir is charts/eurekube.
func chartDir() string { return filepath.Join(tools.root, "charts", "eurekube") }

// run runs a command and returns its standard output, or an error with its
// standard error.
func run(name string, args ...string) ([]byte, error) {
	return runEnv(nil, name, args...)
}

// runEnv is run with more environment variables (NAME=value).
func runEnv(env []string, name string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr.String())
	}
	return out, nil
}

// valuesFile writes values (YAML) to a file for helm's -f; "" gives no file.
func valuesFile(t *testing.T, values string) []string {
	t.Helper()
	if values == "" {
		return nil
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"-f", path}
}

// helmTemplate renders the chart for releaseName in namespace with values
// (YAML, "" for the defaults), hooks included.
func helmTemplate(t *testing.T, namespace, values string) ([]byte, error) {
	t.Helper()
	args := append([]string{"template", releaseName, chartDir(), "--namespace", namespace}, valuesFile(t, values)...)
	return run(tools.helm, args...)
}

// objects are the objects of a rendered manifest stream.
type objects []*unstructured.Unstructured

// render renders the chart and decodes it; any error fails the test.
func render(t *testing.T, namespace, values string) objects {
	t.Helper()
	raw, err := helmTemplate(t, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeObjects(raw)
	if err != nil {
		t.Fatalf("decode helm template's output: %v", err)
	}
	return objs
}

// kustomize builds a directory of manifests/ with kubectl kustomize.
func kustomize(t *testing.T, dir string) objects {
	t.Helper()
	raw, err := run(tools.kubectl, "kustomize", filepath.Join(tools.root, "manifests", dir))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeObjects(raw)
	if err != nil {
		t.Fatalf("decode manifests/%s: %v", dir, err)
	}
	return objs
}

// find returns the object of that kind and name, or nil.
func (o objects) find(kind, name string) *unstructured.Unstructured {
	for _, u := range o {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// get returns the object of that kind and name, failing the test without it.
func (o objects) get(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := o.find(kind, name)
	if u == nil {
		t.Fatalf("no %s %q rendered; got %v", kind, name, o.names())
	}
	return u
}

// typed converts the object of that kind and name into into.
func (o objects) typed(t *testing.T, kind, name string, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.get(t, kind, name).Object, into); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
}

// ofKind returns the objects of one kind.
func (o objects) ofKind(kind string) objects {
	var out objects
	for _, u := range o {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// names lists "Kind namespace/name" of every object.
func (o objects) names() []string {
	var out []string
	for _, u := range o {
		out = append(out, key(u))
	}
	return out
}

func key(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// toYAML is for failure messages.
func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

// allows reports whether rules grant verb on resource (of group), named
// name ("" for a request without a name, such as create).
func allows(rules []rbacv1.PolicyRule, group, resource, verb, name string) bool {
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, group) || !slices.Contains(r.Resources, resource) || !slices.Contains(r.Verbs, verb) {
			continue
		}
		if len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name) {
			return true
		}
	}
	return false
}

// diff lists where two decoded objects differ, by path: "manifests" is
// manifests/default's value, "chart" the chart's.
func diff(path string, manifests, chart any) []string {
	if reflect.DeepEqual(normalize(manifests), normalize(chart)) {
		return nil
	}
	mm, mok := manifests.(map[string]any)
	cm, cok := chart.(map[string]any)
	if mok && cok {
		var out []string
		for _, k := range unionKeys(mm, cm) {
			out = append(out, diff(path+"."+k, mm[k], cm[k])...)
		}
		return out
	}
	ms, mok := manifests.([]any)
	cs, cok := chart.([]any)
	if mok && cok && len(ms) == len(cs) {
		var out []string
		for i := range ms {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), ms[i], cs[i])...)
		}
		return out
	}
	return []string{fmt.Sprintf("%s:\nmanifests/: %s\nchart: %s", path, toYAML(manifests), toYAML(chart))}
}

func unionKeys(a, b map[string]any) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// normalize makes numbers comparable: kustomize decodes 5 as int64, Helm's
// toYaml of a decoded file as float64 in some places.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	case int64:
		return float64(v)
	case int:
		return float64(v)
	default:
		return v
	}
}

// notInNamespaces is the webhook's "kubernetes.io/metadata.name NotIn" list.
func notInNamespaces(wh admissionregistrationv1.MutatingWebhook) []string {
	if wh.NamespaceSelector == nil {
		return nil
	}
	for _, e := range wh.NamespaceSelector.MatchExpressions {
		if e.Key == "kubernetes.io/metadata.name" && e.Operator == "NotIn" {
			return e.Values
		}
	}
	return nil
}

// everythingOn turns on every optional part of the chart.
const everythingOn = `
certificates: {mode: self-managed}
alerts: {enabled: true}
metrics: {serviceMonitor: {enabled: true, interval: 30s}}
credentialsNamespaces: [shop, billing]
manager:
  eurekaURLs: [http://eureka-0.eureka:8761/eureka, http://eureka-1.eureka:8761/eureka]
  allowedRegistrarImages: [registry.example.com/eurekube/*]
  allowedEurekaHosts: ["*.eureka.svc:8761", eureka.shared.example.com]
  defaultDrainSeconds: 60
  clusterID: prod-eu
  resyncPeriod: 1m
  eurekaTimeout: 3s
  claimHold: 48h
  maxPatternApps: 50
  podCIDRs: [10.244.0.0/16, "fd00:10:244::/56"]
  serviceCIDRs: [10.96.0.0/12]
  maxEurekaServerSets: 8
  excludedNamespaces: [monitoring]
  execSleepFallback: true
  logLevel: debug
  priorityClassName: system-cluster-critical
`

var hookAnnotation = "helm.sh/hook"
