// Package controller is the EurekaSyncer reconciler. For each syncer it
// measures the selected pods (from the manager's cache) and this cluster's
// instances of the syncer (from Eureka, which cannot be watched, so every
// syncer is requeued each resync period), removes orphans, and writes the
// status when something changed. The syncers of one Eureka server set
// (same URLs and credentials) share one read of its whole registry per
// resync period, however many they are; a failed read is reported by every
// one of them (EurekaReachable).
//
// Orphans are instances carrying this cluster's markers (managed-by,
// cluster id, namespace, syncer) whose pod UID no longer exists (absent
// from the cache and then from an uncached read of the API server) or whose
// pod has finished (phase Failed, an evicted pod among them, or Succeeded:
// its registrar has stopped, and an instance it could not cancel would stay
// UP until its lease ends, and for good under Eureka's self-preservation).
// An instance without this cluster's markers (a VM's, another cluster's) is
// never touched. Orphans are only looked for after the pod informer has
// synced, which controller-runtime guarantees before the first reconcile.
//
// status.lastSyncTime is the last successful read of Eureka; it is
// rewritten with any other change of the status, and otherwise once every
// five minutes at a phase of the syncer's own, so an idle syncer costs no
// API write per resync, a cluster's refreshes are spread over the five
// minutes, and a new leader's first pass over right statuses writes none
// (lastsync.go).
//
// Deleting a syncer (finalizer eurekube.io/finalizer) detaches it: the
// webhook stops injecting at once; the instances of pods that are gone are
// removed; those of running pods are re-registered DOWN (a client-reported
// DOWN survives heartbeats and shows through any status override), so
// callers stop using them. They leave Eureka when their pods stop and
// the registrar cancels. The finalizer is released once no instance of the
// syncer is left and no pod runs its registrar; until then the Synced
// condition (reason Detaching) and events name the pods to restart.
//
// A finalizer never holds a namespace hostage: while a pod runs the
// syncer's registrar (not Failed or Succeeded), the finalizer waits for
// Eureka as long as it takes, since that registrar could still register or
// heartbeat; once none does, it waits at most DefaultDetachTimeout (2
// minutes; Options.DetachTimeout) counted from when the reconciler first
// found no such pod (in memory: a new leader counts again, so the wait may
// be longer, never shorter), then is released anyway (Eureka unreachable, a
// typo in its URLs, an instance that cannot be cancelled). A Warning Event
// DetachTimedOut names what may be left (the app and instance ids, or that
// the registry could not be read at its URLs, and why): nothing heartbeats
// those instances, so Eureka evicts them when their lease runs out, unless
// it is in self-preservation. Meanwhile Synced says when the finalizer
// goes, and the reconcile is requeued for then (or the next resync).
//
// A syncer counts the pods it owns: those its selector matches that it
// injected (annotation eurekube.io/syncer) or that no syncer injected
// (created before injection was enabled, or opted out: PodsInjected names
// them). A pod another syncer injected is registered under that syncer's
// app, so it is only counted in podsOwnedByOtherSyncers and named by the
// Exclusive condition; a pod the webhook skipped on purpose (a Job's) is
// counted in skippedPods. status.ready reads like a Deployment's READY:
// instances UP / pods selected. Synced (Eureka agrees with Kubernetes) is
// never True while pods are selected and no instance is UP. Injected pods
// without a drain are counted and named by Drained. What the webhook
// adapted for each pod (eurekube.io/adaptations) is aggregated per reason
// into status, Events and a metric: see adaptations.go.
//
// What the registrars were given and how they fare (registrars.go). A
// registrar keeps the settings it was injected with (its environment's
// literal values, which never change), so a pod injected from an older spec
// (a syncer deleted and created again with other URLs, a changed port or
// health check) keeps registering as before. Such pods are reported the way
// pods on an older registrar image are: counted in outdatedRegistrarPods
// (a pod once, whatever differs) under the one RegistrarCurrent condition,
// as the fix is the same (restart them); its reason is OutdatedRegistrar
// when any pod runs an older image and OutdatedSpec when only settings
// differ, and the message names, per difference, the variable, both values
// and the pods. Compared are the Eureka URLs, app name, port and health
// check (type, scheme, path, port, period, timeout, thresholds): what the
// webhook would give the pod now (webhook.Settings under the syncer, the
// pod's annotations and the manager's webhook defaults, Options.Defaults)
// against what its registrar parses from its environment
// (sidecar.ParseEnv). Where either cannot be known nothing is claimed. A pod
// is parsed again only when its resourceVersion or the syncer's generation
// changed, so a resync of unchanged pods parses none.
//
// RegistrarHealthy (True, or False with reason RegistrarFailing; named for
// what True means, like every condition) says when the registrars of
// selected pods exit with an error (not restarted, waiting in
// CrashLoopBackOff, or running again for less than the 10 minutes after
// which the kubelet resets its restart backoff, so a crash loop does not
// flap), or cannot start (image pull, container config errors). Its message
// quotes each one's last words, the last line of its termination message
// (FallbackToLogsOnError keeps its last log lines there), cut to 300
// characters, and names up to three pods; Synced, when instances are
// missing, says the same with reason RegistrarFailing, and a Warning Event
// RegistrarFailing is recorded when the message changes (a Normal
// RegistrarsRunning when none fails any more).
//
// spec.traffic and lost nodes (traffic.go, nodes.go): Standby holds the
// syncer's instances OUT_OF_SERVICE with Eureka's status override, Serve
// removes it; the pods' eurekube.io/traffic annotation, which their
// registrars read before registering, is kept current. Instances of pods
// on a node whose Ready condition is not True are held the same way until
// it is; where Kubernetes did not copy a node's zone label onto its pods,
// the reconciler does. The migration view (view.go) counts, from the same
// registry read, the syncer's instances by status and the app's instances
// elsewhere (VMs, other clusters), and says where calls go.
//
// Service mode (service*.go): the elected manager registers the address
// VMs reach a Service at (service_address.go), one instance per address
// (service_register.go), and a leader-only keeper heartbeats them
// (service_heartbeats.go).
//
// # Where the code is
//
// One controller and one Reconcile (reconciler.go: the options, the
// watches, the pass), with a file per concern. Not a controller per
// concern: they share one registry read and one status write per pass,
// and their conditions depend on each other (Synced counts the instances
// traffic holds out, and says what detach does); separate controllers
// would each read Eureka and race over the status. observe.go measures: the
// pods from the cache, the instances from the registry read of the
// syncer's servers (eureka.go keeps one client per server set,
// eurekaconfig.go reads their credentials and TLS material). Then, in
// turn: orphans.go collects orphans; service*.go is Service mode;
// traffic.go applies spec.traffic, nodes.go finds the lost nodes and the
// zones; detach.go detaches a deleted syncer; status.go computes and
// writes the status. pods.go counts the pods; registrars.go says what
// their registrars were given and how they fare; adaptations.go
// aggregates what the webhook adapted; view.go is the migration view;
// leasesafe.go the LeaseSafe condition; memo.go remembers this manager's
// own Eureka writes; podcache.go is what the manager caches of pods (each
// trimmed to what the reconciler reads, indexed by injecting syncer and by
// node); selectors.go keeps each syncer's parsed selector; metrics.go
// publishes the metrics; log.go gives each
// reconcile its logger (its syncer and reconcile id), which the concerns
// take from the context. Each condition has one owner, named in status.go.
// Each test file is named after the file it tests (_suite_test.go: its
// tests against a real API server and Eureka); the suite's helpers are in
// helpers_test.go, the pure tests' builders in fixtures_test.go.
package controller
