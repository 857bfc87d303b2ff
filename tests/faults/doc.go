// Package faults is the fault suite: the failures a platform team will meet
// in production, provoked on real parts with deadlines, and what Eurekube
// promises through each.
//
//   - Eureka killed and restarted under 200 running registrars: every one is
//     registered again within one heartbeat interval of the server's return,
//     and nothing is duplicated.
//   - One of two Eureka URLs dead (refusing, black-holed, or dying while in
//     use): no registration or heartbeat fails.
//   - A webhook replica killed during 500 pod creates (failurePolicy Fail, two
//     replicas, a real kube-controller-manager): no pod exists without the
//     registrar; a create that failed said why and its ReplicaSet retried.
//   - Over 1,000 malformed AdmissionReviews and annotation values: every
//     request is answered, none panics, the manager keeps injecting.
//
// Each test bounds itself; the suite runs in `make test` in a few minutes.
package faults
