// Package admission is Eurekube's admission acceptance suite: a real
// kube-apiserver (envtest) calls the manager's webhook over TLS, with the
// manager running in-process exactly as cmd/manager starts it and its
// certificates made by package certs. The tests create namespaces, syncers
// and pods as a user would and check what the API server stores or refuses.
// There is no kubelet: pods stay Pending, which is all admission needs.
package admission
