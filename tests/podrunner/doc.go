// Package podrunner plays the kubelet (and the scheduler) for the local
// sandbox and the end-to-end tests: it registers a node, binds every pending
// pod to it, gives each pod its own loopback IP (127.0.0.2, 127.0.0.3, …),
// and runs the pod's containers as processes — the registrar container as
// the real registrar binary with exactly the environment of its container
// spec (downward API, secretKeyRef and $(VAR) references resolved), every
// other container as testapp. It reports readiness from readiness probes
// and, when a pod is deleted, follows the kubelet's order: preStop hooks
// run (the sleep action included); containers without one get SIGTERM at
// once; each container with one gets SIGTERM when its hook ends; SIGKILL at
// the end of the grace period; then the pod object is removed.
//
// One emulation is explicit: a process binds its pod's IP, not a network
// namespace of its own, so an address without a host (":9901") in the
// registrar's EUREKUBE_LISTEN_ADDR is bound on the pod IP.
package podrunner
