// Package cluster is Eurekube installed on a real node the way users
// install it: the node (package node), cert-manager's controller and
// cainjector (issuing the webhook's serving certificate and injecting its
// CA), and manifests/default applied with kubectl as it is in the
// repository, so the manager runs as its Deployment's pods from its image
// with the mounted Secret, and the API server reaches the webhook through
// its Service. Three Eureka servers replicating to each other, as
// production runs Eureka, run on the host on the node's address, where pods
// reach them; syncers and callers list all three. Callers on the host play
// VMs that reach pod IPs.
//
// The suite of this package is the end-to-end suite: one cluster (TestMain)
// and a real Spring Cloud client on the host calling services by name, as a
// VM does. Its timings are shortened consistently. A caller can be sent to
// a pod until every cache between the registry and the caller has
// forgotten it:
//
//	server response cache   ≤ 1 s  (fast profile: no read-only cache, read-write entries expire after 1 s)
//	client registry fetch   ≤ 2 s  (eureka.client.registry-fetch-interval-seconds)
//	LoadBalancer cache      ≤ 2 s  (spring.cloud.loadbalancer.cache.ttl)
//	request in flight       ≤ 3 s  (the client's read timeout)
//
// so at most 8 s, and the suite's drain (preStop sleep) is 10 s: a pod
// keeps serving for 10 s after its registrar cancelled it. In production
// the same sum is 30 + 30 + 35 s plus the request, hence the default drain
// of 100 s (the README's drain paragraph). The no-drain control runs with the very
// same client and shows failed calls, so it is the drain that protects the
// callers.
//
// The gateway story (gateway_test.go) runs the installed gateway enforcing
// (EnforceGateway) in front of Eureka servers of its own that demand basic
// auth only the gateway holds; the manager names the gateway (GatewayURL)
// from the install on, so the registrars of the syncers that name it carry
// their pods' tokens for it. Its chain of caches has one more link, the
// gateway's shared copy of a polled read, shortened to a second, and its
// pods drain for two seconds more.
//
// A service mesh's injector (MeshInjector), a webhook the test process
// serves, runs after Eurekube's on the pods labelled for it, putting a
// proxy in front of the app as Istio or Linkerd do (neighbour_test.go).
//
// The manager's faults run here too (faults_test.go): a webhook replica
// killed with SIGKILL during 500 creates and then every replica gone, and
// over 1,000 malformed AdmissionReviews sent to a manager pod as the API
// server reaches it. Their pods stay Pending (a node selector no node
// matches): the faults are about admission, and 600 running pods would
// only measure how fast two cores start containers.
package cluster
