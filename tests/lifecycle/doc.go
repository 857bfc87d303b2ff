// Package lifecycle is Eurekube's life in a cluster from install to
// uninstall, on a real node (package node) with one Eureka server and no
// cert-manager: Helm installs the chart with self-managed certificates,
// upgrades it to new manager and registrar images (the pods left on the old
// registrar are counted, then cleared by a rollout, while the app keeps its
// registrations) and uninstalls it (the pre-delete hook detaches every
// syncer: nothing of the cluster stays in Eureka while the app runs on);
// then kustomize (manifests/self-managed) and `eurekube uninstall` do the
// same. A second story rotates the password of a Eureka server demanding
// basic auth: the pods' registrars follow the Secret through the files the
// kubelet refreshes, and the manager follows it too, with no pod restarted. It needs its own node because it installs and removes what the
// end-to-end suite (package cluster) keeps installed; one node runs per
// machine, so the two suites take turns.
package lifecycle
