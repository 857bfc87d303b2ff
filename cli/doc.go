// Package cli is the eurekube command line, also installed as the kubectl
// plugin kubectl-eurekube: offline injection of manifests for GitOps diffs
// (inject), the migration view of every syncer and the writes the gateway
// refused (status), the checks a platform team runs first (check), and a
// clean removal of every syncer before Eurekube is uninstalled
// (uninstall). cmd/eurekube only calls Main.
//
// Decisions written down here:
//   - inject runs the webhook's own pure webhook.Inject with the manager's
//     own defaults (app.ParseFlags, app.WebhookDefaults), and applies its
//     JSON patch to the document as the API server would: nothing about
//     injection is decided here, so the output is what the cluster admits.
//   - The checks are pure functions of what was read (evaluate*), the
//     reading is separate (gather*), so every verdict is unit-tested
//     without a cluster.
//   - The gateway is read from its Deployment (its flags parsed by its own
//     parser, $(VAR) expanded as the kubelet does) and its refusals from
//     its Events on pods, through core/v1, which whoever reads Events may
//     list; the CLI never calls the gateway either.
//   - Nothing here talks to Eureka: the CLI runs outside the cluster and
//     may not reach it; the manager reads Eureka every resync and writes
//     what it found into the syncers' conditions, which the CLI reports.
//   - Kubeconfig is resolved as kubectl does (--kubeconfig, KUBECONFIG,
//     ~/.kube/config, --context), else the in-cluster config, so the same
//     binary runs as a Helm hook inside the manager's image.
package cli
