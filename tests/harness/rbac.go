package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RBACManifests are the manager's ServiceAccount, roles and bindings,
// relative to the repository root.
const RBACManifests = "manifests/rbac"

// ManagerServiceAccount is the identity the manager runs as in a cluster.
const ManagerServiceAccount = "eurekube-manager"

// ManagerKubeconfig installs the RBAC of manifests/rbac — these very files —
// and returns a kubeconfig that authenticates as the manager's
// ServiceAccount, so every suite that starts a manager through the harness
// proves the manifests grant what it needs (and it fails, Forbidden, on
// anything they do not).
func (c *ControlPlane) ManagerKubeconfig(ctx context.Context) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(root, RBACManifests, "*.yaml"))
	if err != nil {
		return "", fmt.Errorf("rbac: %w", err)
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		if err := c.applyAll(ctx, f); err != nil {
			return "", err
		}
	}
	user, err := c.Env.ControlPlane.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + ManagerNamespace + ":" + ManagerServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ManagerNamespace, "system:authenticated"},
	}, nil)
	if err != nil {
		return "", fmt.Errorf("rbac: the manager's ServiceAccount: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("rbac: kubeconfig: %w", err)
	}
	path := filepath.Join(filepath.Dir(c.Kubeconfig), "manager.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("rbac: kubeconfig: %w", err)
	}
	return path, nil
}

// applyAll creates every object of a YAML file; existing ones are kept.
func (c *ControlPlane) applyAll(ctx context.Context, file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("rbac: %w", err)
	}
	objs, err := DecodeObjects(raw)
	if err != nil {
		return fmt.Errorf("rbac: %s: %w", file, err)
	}
	for _, u := range objs {
		if err := c.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("rbac: create %s %s from %s: %w", u.GetKind(), u.GetName(), file, err)
		}
	}
	return nil
}

// DecodeObjects reads every object of a YAML (or JSON) stream, such as a
// manifest file or the output of kubectl kustomize; empty documents are
// skipped.
func DecodeObjects(raw []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
