// Package webhook is Eurekube's mutating admission webhook for pods. Inject
// is the whole pipeline as a pure function over values: it decides whether
// a new pod is registered in Eureka (Decide, with a Reason from reasons.go),
// builds the injected pod (Mutate, with the registrar's settings resolved
// from sidecar.Defaults and rendered by sidecar) and the JSON patch of what
// changed. The Handler only does I/O: decode the pod, read the namespace
// and its syncers from the cache, call Inject, answer, count.
//
// Design decisions written down here:
//   - A bad or unknown eurekube.io/ annotation denies the pod, naming the
//     annotation, the value and what is allowed: typos never pass silently.
//   - Several syncers selecting one pod: the oldest (creationTimestamp, then
//     name) wins and the response warns, naming the others.
//   - A syncer being deleted injects nothing, so a deleted syncer stops
//     adding registrars at once.
//   - hostNetwork pods share the node's ports: the registrar's health port
//     may clash with another pod's, so the response warns (and the port can
//     be chosen per syncer). The pod is still injected.
//   - The drain (see addDrain in drain.go) goes to every container but the
//     registrar and composes with the container's own preStop: the drain
//     first, so the app keeps serving until every client cache has
//     forgotten the cancelled instance, then the container's own hook, just
//     before SIGTERM as it ran before. Without a hook or with a sleep hook
//     the kubelet's sleep action does it; an exec or httpGet hook runs
//     through the drain helper, the registrar binary copied by an init
//     container into a volume, because a container has one preStop and a
//     distroless image has no shell and no sleep. A drain endpoint on the
//     registrar was weighed and not chosen: it covers httpGet but not exec,
//     so a helper would be needed anyway, and the registrar would have to
//     outlive its own SIGTERM. --exec-sleep-fallback (kubelets without the
//     sleep action) drains every container through the same helper.
//   - Pods meant to finish (restartPolicy Never or OnFailure: Jobs) are not
//     injected: the registrar would keep them running forever. Windows pods
//     (spec.os.name) are not either: the registrar and the drain are Linux
//     containers. Both are annotated as skipped, naming the syncer and why.
//   - Closure: Eurekube accepts everything it writes. Its own annotations
//     are known annotations; a skipped pod sent back is skipped again the
//     same way, and an injected pod sent back (reinvocation after a later
//     webhook, reinvocationPolicy IfNeeded, or `eurekube inject` output) is
//     converged, not injected again (Converge): containers a later webhook
//     added (a classic mesh proxy) get the drain, the grace period is not
//     lengthened twice, and the traffic annotation follows the syncer.
//     Inject(Inject(p)) = Inject(p); closure_test.go fuzzes it.
//   - One validation, the registrar's: Mutate runs sidecar.ParseEnv over
//     the settings it renders, so a setting the registrar would refuse
//     denies the pod with the registrar's reason instead of crash-looping
//     it. The CRD's rules and the annotation rules are meant to refuse
//     such settings first, where the user typed them; the fuzz target
//     FuzzInject_WhatIsAdmittedTheRegistrarAccepts checks that they do,
//     running the CRD's schema and CEL rules in process.
//   - The JSON patch touches only what changes (an annotation key, an
//     appended container or volume, a changed field of a container), so
//     fields of a newer API server that this build does not know survive.
//   - The registrar and the drain installer fix no user or group: the image
//     runs as its numeric non-root user, runAsNonRoot checks it (Pod
//     Security restricted), and OpenShift's restricted SCCs can assign a
//     UID from the namespace's range.
//   - What was adapted or could not be done is recorded on the pod
//     (eurekube.io/adaptations) and reported by the reconciler; admission
//     warnings alone reach nobody for pods made by controllers.
//   - spec.traffic reaches the registrar as the pod's eurekube.io/traffic
//     annotation (set at admission, replacing any value the pod carried;
//     kept current by the reconciler), through a downward-API volume mounted
//     into the registrar only: a file, not an environment variable, since
//     the kubelet refreshes it when the annotation changes, and the
//     registrar reads it before every registration, so a pod of a Standby
//     syncer is never UP. Service-mode syncers inject nothing.
//   - Nothing depends on the pod's name, which is empty for generateName
//     pods at admission: the registrar learns it from the downward API.
//   - Every registrar of every pod the webhook sees is read as the kubelet
//     will run it (registrars.go): any container, init container or
//     ephemeral container named eurekube-registrar or running a registrar
//     image (by repository), env resolved in order, last one wins, $(VAR)
//     expanded (expansion.go). What the webhook cannot read at admission
//     (valueFrom, envFrom, command/args) or an identity other than the
//     pod's own fieldRefs denies the pod; each registrar's app passes the
//     ownership gate (ownership.go), which also decides elsewhere: Refuse
//     from the reconciler's registry reads (Registries), fail closed. The
//     pods the webhook is never called for are the placement policy's
//     (manifests/registrar-image-policy).
//   - The Secrets a syncer names are mounted only with their consent
//     label, read as metadata (consent.go); otherwise the pod is denied.
//   - With a gateway audience (--gateway-audience), the registrar alone
//     mounts a projected ServiceAccount token for that audience, which it
//     sends to the manager's own Eureka servers, where Eurekube's gateway
//     verifies it (gateway.go); a registrar of a syncer that names other
//     servers is given none. A pod injected before the audience was set
//     keeps running without it until its next rollout (Converge adds no
//     volume).
package webhook
