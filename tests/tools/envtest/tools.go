//go:build tools

// Package envtest pins the Kubernetes control-plane binaries that the tests
// run, and the kubectl of the same release for the sandbox. It is a module of its own so that k8s.io/kubernetes never enters the
// graph of the main module; build.sh compiles the binaries from here.
package envtest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
