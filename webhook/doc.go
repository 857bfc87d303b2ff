// Package webhook is Eurekube's mutating admission webhook for pods: it
// decides whether a new pod is registered in Eureka (Decide), builds the
// injected pod (Mutate), and answers the API server with a JSON patch
// (Handler). Decide and Mutate are pure functions over values; only the
// Handler reads the cache, so the injection rules are tested without a
// cluster and the handler is a thin decode → look up → decide → mutate →
// patch pipeline.
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
//   - Nothing depends on the pod's name, which is empty for generateName
//     pods at admission: the registrar learns it from the downward API.
package webhook
