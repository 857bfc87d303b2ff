// Package harness starts the real parts Eurekube's tests run against: a
// kube-apiserver with etcd (envtest, from binaries the project builds
// itself) and a Spring Cloud Netflix Eureka server (built with Maven). It
// finds or builds what it needs, gives clear errors when something cannot
// start, and leaves no process behind.
package harness
