// Package helmchart tests Eurekube's Helm chart (charts/eurekube) with the
// helm command built from its Go module (tests/tools/helm/build.sh): helm
// lint, the values schema, and the one source of truth with manifests/: the
// chart rendered with its default values installs the same objects as
// manifests/default (built with kubectl kustomize), and every namespace
// reference follows the release namespace.
package helmchart
