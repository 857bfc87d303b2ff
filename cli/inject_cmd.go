package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/webhook"
)

const injectHelp = `
Inject the registrar into the pods and pod templates of a YAML stream, as
the webhook would at admission, and print the stream: for GitOps diffs and
reviews, like istioctl kube-inject. The webhook's own code decides and
mutates (webhook.Inject), so the output is what the cluster would run.

Pods and the pod templates of Deployments, StatefulSets, DaemonSets,
ReplicaSets, Jobs and CronJobs are injected; every other document is
copied as it is, in order. A document the webhook changes is written again
from its fields: its comments are lost and its keys sorted. Jobs' pods are
annotated as skipped and get no registrar, as in the cluster: a registrar
would keep them running forever.

Offline (the default), the syncers are those of --syncers and the
EurekaSyncer documents of the stream itself; a namespace has opted in
unless the stream holds its Namespace without the label
eurekube.io/injection=enabled, or the manager excludes it; the manager's
settings are the flags below, with the manager's defaults. --cluster-id is
required offline: the manager's --cluster-id, else the UID of namespace
kube-system. With --from-cluster, the syncers, the namespaces' labels and
the manager's settings (its Deployment's arguments) are read from the
cluster, and the stream's syncers and namespaces replace the cluster's of
the same name.

A document's namespace is its metadata.namespace, else --namespace, else
"default". A document the webhook denies (a bad eurekube.io/ annotation)
is named with the webhook's reason on standard error, nothing is printed
and the exit code is 1. One line per pod template on standard error says
what the webhook decided and why.`

// injectFlags are inject's command line.
type injectFlags struct {
	filename    string
	syncerFiles []string
	fromCluster bool
	kube        kubeFlags
	manager     managerFlags

	// The manager's flags offline; forwarded to manager.ParseFlags when set.
	registrarImage  string
	eurekaURLs      []string
	clusterID       string
	defaultDrain    int32
	execSleep       bool
	excluded        []string
	logLevel        string
	gatewayAudience string
	allowedImages   []string
	allowedHosts    []string
}

// managerFlags locate the manager in the cluster.
type managerFlags struct {
	namespace  string
	deployment string
}

func (m *managerFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&m.namespace, "manager-namespace", "eurekube-system", "namespace of the Eurekube manager")
	fs.StringVar(&m.deployment, "manager-deployment", "eurekube-manager", "name of the manager's Deployment")
}

func runInject(ctx context.Context, e *env, args []string) error {
	// The manager's defaults, from its own parser: an empty command line
	// fails validation (no --registrar-image) but still sets every default.
	defaults, _ := manager.ParseFlags(nil, io.Discard)

	var f injectFlags
	fs := e.flagSet("inject", "-f FILE|- [--syncers FILE | --from-cluster] [flags]", injectHelp)
	fs.StringVarP(&f.filename, "filename", "f", "", `YAML stream to inject ("-": standard input)`)
	fs.StringArrayVar(&f.syncerFiles, "syncers", nil, "YAML file with EurekaSyncers (repeatable; other documents are ignored)")
	fs.BoolVar(&f.fromCluster, "from-cluster", false, "read the syncers, the namespaces and the manager's settings from the cluster")
	fs.StringVar(&f.registrarImage, "registrar-image", "", "the manager's --registrar-image (required offline)")
	fs.StringSliceVar(&f.eurekaURLs, "eureka-url", nil, "the manager's --eureka-url: Eureka servers for syncers that name none")
	fs.StringVar(&f.clusterID, "cluster-id", "", "the manager's --cluster-id, else the UID of namespace kube-system (required offline)")
	fs.Int32Var(&f.defaultDrain, "default-drain", defaults.DefaultDrainSeconds, "the manager's --default-drain: preStop sleep in seconds for syncers that set none")
	fs.BoolVar(&f.execSleep, "exec-sleep-fallback", defaults.ExecSleepFallback, "the manager's --exec-sleep-fallback")
	fs.StringSliceVar(&f.excluded, "excluded-namespace", defaults.ExcludedNamespaces, "the manager's --excluded-namespace (its own namespace is always excluded)")
	fs.StringVar(&f.logLevel, "log-level", defaults.LogLevel, "the manager's --log-level, which the registrar inherits")
	fs.StringVar(&f.gatewayAudience, "gateway-audience", defaults.GatewayAudience, "the manager's --gateway-audience: the registrars of syncers that talk to --eureka-url get a projected token for the gateway")
	fs.StringSliceVar(&f.allowedImages, allowlist.ImagesFlag, nil, "the manager's --"+allowlist.ImagesFlag+": registrar images syncers may name besides --registrar-image")
	fs.StringSliceVar(&f.allowedHosts, allowlist.HostsFlag, nil, "the manager's --"+allowlist.HostsFlag+": Eureka hosts syncers may name besides those of --eureka-url")
	f.manager.add(fs)
	f.kube.add(fs, `namespace of the documents that name none (default "default")`)
	if err := parse(fs, args); err != nil {
		return err
	}
	if f.filename == "" {
		return usagef("-f FILE (or -f - for standard input) is required")
	}
	if f.fromCluster && len(f.syncerFiles) > 0 {
		return usagef("--syncers and --from-cluster exclude each other: the cluster's syncers are read with --from-cluster")
	}
	if f.fromCluster {
		for _, name := range []string{"registrar-image", "eureka-url", "cluster-id", "default-drain", "exec-sleep-fallback", "excluded-namespace", "log-level", "gateway-audience"} {
			if fs.Changed(name) {
				return usagef("--%s is read from the manager's Deployment with --from-cluster", name)
			}
		}
	}

	in, err := e.open(f.filename)
	if err != nil {
		return err
	}
	defer in.Close()
	docs, err := readDocuments(in)
	if err != nil {
		return fmt.Errorf("%s: %w", f.filename, err)
	}
	defaultNamespace := f.kube.namespace
	if defaultNamespace == "" {
		defaultNamespace = corev1.NamespaceDefault
	}
	stream, err := streamObjects(docs, defaultNamespace)
	if err != nil {
		return err
	}

	var src injectSource
	var whDefaults webhook.Defaults
	if f.fromCluster {
		src, whDefaults, err = f.clusterSource(ctx, e, stream)
	} else {
		src, whDefaults, err = f.offlineSource(fs, stream, defaultNamespace)
	}
	if err != nil {
		return err
	}

	res, err := injectDocuments(docs, src, whDefaults, defaultNamespace)
	if err != nil {
		return err
	}
	for _, n := range res.notes {
		fmt.Fprintln(e.Err, n)
	}
	if len(res.denials) > 0 {
		for _, d := range res.denials {
			fmt.Fprintln(e.Err, d)
		}
		return errReported
	}
	_, err = e.Out.Write(res.out)
	return err
}

// offlineSource is the syncers of the files and the stream, and the
// webhook's defaults from the manager's flags given to inject.
func (f *injectFlags) offlineSource(fs *pflag.FlagSet, stream *offlineSource, defaultNamespace string) (injectSource, webhook.Defaults, error) {
	if f.clusterID == "" {
		return nil, webhook.Defaults{}, usagef("--cluster-id is required offline: the manager's --cluster-id, else the UID of namespace kube-system (kubectl get namespace kube-system -o jsonpath='{.metadata.uid}'); or use --from-cluster")
	}
	var managerArgs []string
	fs.Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "registrar-image", "cluster-id", "default-drain", "exec-sleep-fallback", "log-level", "gateway-audience":
			managerArgs = append(managerArgs, "--"+fl.Name+"="+fl.Value.String())
		case "eureka-url", "excluded-namespace", allowlist.ImagesFlag, allowlist.HostsFlag:
			for _, v := range fl.Value.(pflag.SliceValue).GetSlice() {
				managerArgs = append(managerArgs, "--"+fl.Name+"="+v)
			}
		}
	})
	cfg, err := manager.ParseFlags(managerArgs, io.Discard)
	if err != nil {
		return nil, webhook.Defaults{}, usageError{strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	for _, name := range f.syncerFiles {
		in, err := os.Open(name)
		if err != nil {
			return nil, webhook.Defaults{}, fmt.Errorf("--syncers: %w", err)
		}
		syncers, err := syncersFile(in, defaultNamespace)
		in.Close()
		if err != nil {
			return nil, webhook.Defaults{}, fmt.Errorf("--syncers %s: %w", name, err)
		}
		stream.all = append(stream.all, syncers...)
	}
	stream.excluded = append(slices.Clone(cfg.ExcludedNamespaces), f.manager.namespace)
	return stream, manager.WebhookDefaults(cfg, cfg.ClusterID), nil
}

// clusterSource reads the manager's settings from its Deployment and
// answers from the cluster.
func (f *injectFlags) clusterSource(ctx context.Context, e *env, stream *offlineSource) (injectSource, webhook.Defaults, error) {
	cl, err := f.kube.connect()
	if err != nil {
		return nil, webhook.Defaults{}, err
	}
	m, err := readManager(ctx, cl, f.manager.namespace, f.manager.deployment)
	if err != nil {
		return nil, webhook.Defaults{}, err
	}
	if len(m.ignored) > 0 {
		fmt.Fprintf(e.Err, "warning: the manager's flags %s are unknown to this eurekube (%s): ignored\n", strings.Join(m.ignored, ", "), version())
	}
	clusterID := m.cfg.ClusterID
	if clusterID == "" {
		var ns corev1.Namespace
		if err := cl.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ns); err != nil {
			return nil, webhook.Defaults{}, fmt.Errorf("cluster id: read the UID of namespace kube-system, the manager's default: %w", err)
		}
		clusterID = string(ns.UID)
	}
	excluded := append(slices.Clone(m.cfg.ExcludedNamespaces), f.manager.namespace)
	src := &clusterSource{ctx: ctx, c: cl, excluded: excluded, stream: stream}
	return src, manager.WebhookDefaults(m.cfg, clusterID), nil
}

// open is the file, or standard input for "-".
func (e *env) open(name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(e.In), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}
