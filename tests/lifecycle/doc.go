// Package lifecycle is Eurekube's life in a cluster from install to
// uninstall, on a real node (package node) with one Eureka server and no
// cert-manager: Helm installs the chart with self-managed certificates,
// upgrades it to new manager and registrar images (the pods left on the old
// registrar are counted, then cleared by a rollout, while the app keeps its
// registrations) and uninstalls it (the pre-delete hook detaches every
// syncer: nothing of the cluster stays in Eureka while the app runs on);
// then kustomize (manifests/self-managed) and `eurekube uninstall` do the
// same. It needs its own node because it installs and removes what the
// end-to-end suite (package cluster) keeps installed; one node runs per
// machine, so the two suites take turns, and what needs no install of its
// own (a rotated Eureka password) is a story of the end-to-end suite.
package lifecycle
