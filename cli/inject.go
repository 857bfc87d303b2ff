package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/webhook"
)

// podTemplatePaths are where each workload kind keeps the pod it creates,
// by apiVersion and kind; a Pod is its own template.
var podTemplatePaths = map[string][]string{
	"v1/Pod":              {},
	"apps/v1/Deployment":  {"spec", "template"},
	"apps/v1/StatefulSet": {"spec", "template"},
	"apps/v1/DaemonSet":   {"spec", "template"},
	"apps/v1/ReplicaSet":  {"spec", "template"},
	"batch/v1/Job":        {"spec", "template"},
	"batch/v1/CronJob":    {"spec", "jobTemplate", "spec", "template"},
}

// document is one YAML document of a stream.
type document struct {
	// index counts from 1, as a user counts the documents of a file.
	index int
	raw   []byte
	// obj is raw decoded as JSON values; nil for a document of comments.
	obj map[string]any
}

func (d document) kind() string       { s, _ := d.obj["kind"].(string); return s }
func (d document) apiVersion() string { s, _ := d.obj["apiVersion"].(string); return s }
func (d document) meta() map[string]any {
	m, _ := d.obj["metadata"].(map[string]any)
	return m
}
func (d document) name() string      { s, _ := d.meta()["name"].(string); return s }
func (d document) namespace() string { s, _ := d.meta()["namespace"].(string); return s }

// String names the document for messages: "document 3 (Deployment shop/orders)".
func (d document) String() string {
	if d.obj == nil {
		return fmt.Sprintf("document %d", d.index)
	}
	name := d.name()
	if ns := d.namespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("document %d (%s %s)", d.index, d.kind(), name)
}

// readDocuments splits a YAML stream into its documents, in order.
func readDocuments(in io.Reader) ([]document, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(in))
	var docs []document
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read document %d: %w", len(docs)+1, err)
		}
		d := document{index: len(docs) + 1, raw: raw}
		if err := yaml.Unmarshal(raw, &d.obj); err != nil {
			return nil, fmt.Errorf("%s: not a YAML object: %w", d, err)
		}
		docs = append(docs, d)
	}
}

// injectSource is where the namespaces and syncers come from: flags and
// files (offline) or the cluster.
type injectSource interface {
	// namespace is what the webhook knows of a namespace.
	namespace(name string) (webhook.Namespace, error)
	// syncers are the syncers of a namespace.
	syncers(namespace string) ([]v1alpha1.EurekaSyncer, error)
}

// injectResult is what inject made of a stream.
type injectResult struct {
	// out is the stream to print: every document in order, those the
	// webhook changes patched, the others as they were.
	out []byte
	// notes are one line per pod or pod template: its reason, and the
	// webhook's warnings.
	notes []string
	// denials name each document the webhook denies and why.
	denials []string
}

// injectDocuments runs the webhook's Inject on every pod and pod template
// of docs. defaultNamespace is for documents without one.
func injectDocuments(docs []document, src injectSource, defaults webhook.Defaults, defaultNamespace string) (injectResult, error) {
	var res injectResult
	var out bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			out.WriteString("---\n")
		}
		raw, note, denied, err := injectDocument(d, src, defaults, defaultNamespace)
		if err != nil {
			return injectResult{}, err
		}
		out.Write(raw)
		if len(raw) > 0 && raw[len(raw)-1] != '\n' {
			out.WriteByte('\n')
		}
		res.notes = append(res.notes, note...)
		if denied != "" {
			res.denials = append(res.denials, fmt.Sprintf("%s: denied: %s", d, denied))
		}
	}
	res.out = out.Bytes()
	return res, nil
}

// injectDocument returns the document to print, the notes about it and
// the webhook's denial, if any.
func injectDocument(d document, src injectSource, defaults webhook.Defaults, defaultNamespace string) (raw []byte, notes []string, denied string, err error) {
	path, ok := podTemplatePaths[d.apiVersion()+"/"+d.kind()]
	if !ok || d.obj == nil {
		return d.raw, nil, "", nil
	}
	template, ok := lookup(d.obj, path)
	if !ok {
		return d.raw, []string{fmt.Sprintf("%s: no pod template at .%s, left as it is", d, strings.Join(path, "."))}, "", nil
	}
	pod, err := podOf(template)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: pod template: %w", d, err)
	}
	namespace := cmp.Or(d.namespace(), defaultNamespace)
	ns, err := src.namespace(namespace)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", d, err)
	}
	syncers, err := src.syncers(namespace)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", d, err)
	}

	r := webhook.Inject(pod, ns, syncers, defaults)
	notes = append(notes, fmt.Sprintf("%s: %s%s", d, r.Reason, syncerOf(r)))
	for _, w := range r.Warnings {
		notes = append(notes, fmt.Sprintf("%s: warning: %s", d, w))
	}
	if r.Denied != "" {
		return d.raw, notes, r.Denied, nil
	}
	if len(r.Patch) == 0 {
		return d.raw, notes, "", nil
	}
	if err := patchTemplate(template, r.Patch); err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", d, err)
	}
	raw, err = yaml.Marshal(d.obj)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: encode: %w", d, err)
	}
	return raw, notes, "", nil
}

func syncerOf(r webhook.Result) string {
	if r.Syncer == nil {
		return ""
	}
	return " (EurekaSyncer " + r.Syncer.Name + ")"
}

// lookup is the object at path in obj; an empty path is obj itself.
func lookup(obj map[string]any, path []string) (map[string]any, bool) {
	for _, k := range path {
		next, ok := obj[k].(map[string]any)
		if !ok {
			return nil, false
		}
		obj = next
	}
	return obj, true
}

// podOf decodes a pod template (or a pod) as the API server's JSON
// serializer does, as the webhook's handler decodes its pods.
func podOf(template map[string]any) (*corev1.Pod, error) {
	raw, err := json.Marshal(map[string]any{"metadata": template["metadata"], "spec": template["spec"]})
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// patchTemplate applies the webhook's JSON patch to the pod template (or
// pod) in place, as the API server applies it to a pod (webhook.ApplyPatch),
// so what is printed is what the webhook admits unchanged.
func patchTemplate(template map[string]any, ops []jsonpatch.Operation) error {
	if _, ok := template["metadata"].(map[string]any); !ok {
		template["metadata"] = map[string]any{} // a pod always has one
	}
	raw, err := json.Marshal(template)
	if err != nil {
		return err
	}
	patched, err := webhook.ApplyPatch(raw, ops)
	if err != nil {
		return err
	}
	var out map[string]any
	if err := json.Unmarshal(patched, &out); err != nil {
		return err
	}
	clear(template)
	maps.Copy(template, out)
	return nil
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }
