// Package helmchart tests Eurekube's Helm chart (charts/eurekube) with the
// helm command built from its Go module (tests/tools/helm/build.sh): helm
// lint, the values schema, the one source of truth with manifests/ (the
// chart rendered with its default values installs the same objects as
// manifests/default, built with kubectl kustomize), every namespace
// reference following the release namespace (the pod write policy's
// ServiceAccount too, in a kustomize overlay as well), and a real kube-apiserver
// (envtest) taking every rendered object, with Pod Security restricted
// admitting the manager's, the gateway's and the uninstall Job's pods and
// every pod spec of every kustomize directory and chart rendering, none of
// which fixes a UID (also once given one as OpenShift's restricted-v2 would),
// `eurekube uninstall` deleting syncers as the uninstall Job's
// ServiceAccount, and the gateway's RBAC: what its ServiceAccount may do
// by SubjectAccessReviews (no Secret outside its namespace), and the
// gateway itself run in this process as that ServiceAccount, ready,
// verifying a pod's token and recording an Event.
package helmchart
