package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/webhook"
)

// offlineSource answers from files: the syncers of --syncers and of the
// stream itself, the labels of the stream's Namespace documents; any other
// namespace has opted in, unless the manager excludes it.
type offlineSource struct {
	excluded   []string
	namespaces map[string]map[string]string
	all        []v1alpha1.EurekaSyncer
}

func (s *offlineSource) namespace(name string) (webhook.Namespace, error) {
	labels, ok := s.namespaces[name]
	if !ok {
		labels = map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}
	}
	return webhook.Namespace{Labels: labels, Excluded: slices.Contains(s.excluded, name)}, nil
}

func (s *offlineSource) syncers(namespace string) ([]v1alpha1.EurekaSyncer, error) {
	var out []v1alpha1.EurekaSyncer
	for _, sy := range s.all {
		if sy.Namespace == namespace {
			out = append(out, sy)
		}
	}
	return out, nil
}

// clusterSource answers from the cluster, then from the stream: a syncer
// or Namespace of the stream replaces the cluster's of the same name, as
// applying the stream would.
type clusterSource struct {
	ctx      context.Context
	c        client.Reader
	excluded []string
	stream   *offlineSource
}

func (s *clusterSource) namespace(name string) (webhook.Namespace, error) {
	excluded := slices.Contains(s.excluded, name)
	if labels, ok := s.stream.namespaces[name]; ok {
		return webhook.Namespace{Labels: labels, Excluded: excluded}, nil
	}
	var ns corev1.Namespace
	err := s.c.Get(s.ctx, client.ObjectKey{Name: name}, &ns)
	if apierrors.IsNotFound(err) {
		// As the webhook sees it: a namespace that does not exist has not
		// opted in.
		return webhook.Namespace{Excluded: excluded}, nil
	}
	if err != nil {
		return webhook.Namespace{}, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return webhook.Namespace{Labels: ns.Labels, Excluded: excluded}, nil
}

func (s *clusterSource) syncers(namespace string) ([]v1alpha1.EurekaSyncer, error) {
	var list v1alpha1.EurekaSyncerList
	if err := s.c.List(s.ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list the EurekaSyncers of namespace %s: %w", namespace, err)
	}
	fromStream, _ := s.stream.syncers(namespace)
	out := slices.DeleteFunc(list.Items, func(sy v1alpha1.EurekaSyncer) bool {
		return slices.ContainsFunc(fromStream, func(o v1alpha1.EurekaSyncer) bool { return o.Name == sy.Name })
	})
	return append(out, fromStream...), nil
}

// streamObjects are the syncers and the namespaces' labels of docs.
// Documents without a namespace are in defaultNamespace.
func streamObjects(docs []document, defaultNamespace string) (*offlineSource, error) {
	src := &offlineSource{namespaces: map[string]map[string]string{}}
	for _, d := range docs {
		switch {
		case d.kind() == "Namespace" && d.apiVersion() == "v1":
			labels := map[string]string{}
			if l, ok := d.meta()["labels"].(map[string]any); ok {
				for k, v := range l {
					labels[k], _ = v.(string)
				}
			}
			src.namespaces[d.name()] = labels
		case d.kind() == "EurekaSyncer" && strings.HasPrefix(d.apiVersion(), v1alpha1.GroupVersion.Group+"/"):
			s, err := decodeSyncer(d, defaultNamespace)
			if err != nil {
				return nil, err
			}
			src.all = append(src.all, s)
		}
	}
	return src, nil
}

func decodeSyncer(d document, defaultNamespace string) (v1alpha1.EurekaSyncer, error) {
	var s v1alpha1.EurekaSyncer
	raw, err := jsonOf(d.obj)
	if err == nil {
		err = sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &s)
	}
	if err != nil {
		return s, fmt.Errorf("%s: not an EurekaSyncer: %w", d, err)
	}
	if s.Namespace == "" {
		s.Namespace = defaultNamespace
	}
	return s, nil
}

// syncersFile reads the EurekaSyncers of a YAML stream; other documents
// are ignored, so a whole GitOps directory can be passed.
func syncersFile(in io.Reader, defaultNamespace string) ([]v1alpha1.EurekaSyncer, error) {
	docs, err := readDocuments(in)
	if err != nil {
		return nil, err
	}
	src, err := streamObjects(docs, defaultNamespace)
	if err != nil {
		return nil, err
	}
	return src.all, nil
}

// managerDeployment is the manager as installed: its Deployment and its
// configuration, parsed by the manager's own flag parser.
type managerDeployment struct {
	deployment *appsv1.Deployment
	// args are the manager container's arguments.
	args []string
	// cfg is what manager.ParseFlags makes of args.
	cfg manager.Config
	// ignored are flags of args this version of the CLI does not know (a
	// newer manager).
	ignored []string
}

// readManager reads the manager's Deployment and parses its arguments.
func readManager(ctx context.Context, c client.Reader, namespace, name string) (*managerDeployment, error) {
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d); err != nil {
		return nil, fmt.Errorf("read the manager's Deployment %s/%s (set --manager-namespace and --manager-deployment): %w", namespace, name, err)
	}
	containers := d.Spec.Template.Spec.Containers
	if len(containers) == 0 {
		return nil, fmt.Errorf("the manager's Deployment %s/%s has no container", namespace, name)
	}
	container := containers[0]
	for _, c := range containers {
		if c.Name == "manager" {
			container = c
		}
	}
	m := &managerDeployment{deployment: &d, args: append(slices.Clone(container.Command[min(1, len(container.Command)):]), container.Args...)}
	cfg, ignored, err := parseManagerArgs(m.args, namespace, cmpOr(d.Spec.Template.Spec.ServiceAccountName, "default"))
	if err != nil {
		return nil, fmt.Errorf("the manager's Deployment %s/%s: %w", namespace, name, err)
	}
	m.cfg, m.ignored = cfg, ignored
	return m, nil
}

// parseManagerArgs parses the manager's arguments with manager.ParseFlags, as
// the manager does, in the manager's namespace and as its ServiceAccount.
// Flags it does not know (a manager newer than this CLI) are dropped and
// returned.
func parseManagerArgs(args []string, namespace, serviceAccount string) (manager.Config, []string, error) {
	var ignored []string
	for {
		cfg, err := manager.ParseFlags(args, io.Discard)
		if err != nil && cfg.CertDir == "" { // the flags did not parse: no defaults were set
			name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
			if !ok {
				return manager.Config{}, ignored, fmt.Errorf("manager flags: %w", err)
			}
			ignored = append(ignored, "--"+name)
			args = slices.DeleteFunc(args, func(a string) bool { return a == "--"+name || strings.HasPrefix(a, "--"+name+"=") })
			continue
		}
		// POD_NAMESPACE and POD_SERVICE_ACCOUNT are the Deployment's in the
		// cluster, not this process's environment.
		cfg.Namespace, cfg.ServiceAccount = namespace, serviceAccount
		return cfg, ignored, cfg.Validate()
	}
}
