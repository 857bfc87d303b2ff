// Package faults is the fault suite: the failures a platform team will meet
// in production, provoked on real parts with deadlines, and what Eurekube
// promises through each.
//
//   - Eureka killed and restarted under 200 running registrars: every one is
//     registered again and nothing is duplicated. The registrar's backoff is
//     capped under one heartbeat interval (a unit test); how long each took
//     on the run's machine is logged, not asserted, as a busy two-core
//     machine's timers fire seconds late.
//   - One of two Eureka URLs dead (refusing, black-holed, or dying while in
//     use): no registration or heartbeat fails.
//
// The registrars run as processes on this machine: the fault is Eureka's,
// the registrar binary is the same one its image holds, and 200 pods (600
// containers) on a two-core node would measure the kubelet instead. The
// manager's faults (a webhook replica killed during 500 creates, over
// 1,000 malformed AdmissionReviews) run on the real node with Eurekube
// installed from manifests/default: tests/cluster/faults_test.go.
//
// Each test bounds itself; the suite runs in `make test` in a few minutes.
package faults
