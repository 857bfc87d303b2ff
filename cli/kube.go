package cli

import (
	"fmt"

	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/manager"
)

// kubeFlags choose the cluster as kubectl does: --kubeconfig, else
// KUBECONFIG, else ~/.kube/config, each with --context; without any of
// them, the in-cluster config (a Helm hook in the manager's image).
type kubeFlags struct {
	kubeconfig string
	context    string
	namespace  string
}

// add adds the flags; namespaceHelp, when not empty, adds -n/--namespace
// with that help.
func (k *kubeFlags) add(fs *pflag.FlagSet, namespaceHelp string) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster config)")
	fs.StringVar(&k.context, "context", "", "kubeconfig context to use (default: the current context)")
	if namespaceHelp != "" {
		fs.StringVarP(&k.namespace, "namespace", "n", "", namespaceHelp)
	}
}

func (k *kubeFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	overrides.Context.Namespace = k.namespace
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// cluster is a client of the chosen cluster and the namespace commands
// default to.
type cluster struct {
	client.Client
	config *rest.Config
	// namespace is --namespace, else the context's, else "default".
	namespace string
}

// connect builds the client. Nothing is requested yet, so an unreachable
// cluster fails at the first read, naming what was read.
func (k *kubeFlags) connect() (*cluster, error) {
	cc := k.clientConfig()
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: namespace: %w", err)
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("API client for %s: %w", cfg.Host, err)
	}
	return &cluster{Client: c, config: cfg, namespace: ns}, nil
}

// newScheme is the manager's scheme plus the CRD type, which check reads.
func newScheme() (*runtime.Scheme, error) {
	s, err := manager.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	return s, nil
}
