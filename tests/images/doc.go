// Package images assembles Eurekube's container images without a daemon:
// the registrar, the manager, the test app the end-to-end pods run and the
// kubelet's sandbox ("pause") image. Each image is one layer holding a
// static binary (built as `make build` builds it) beside the few files a
// distroless static image has (/etc/passwd, /etc/group, the CA bundle,
// /tmp), runs as 65532:65532 and has no shell.
//
// Images are reproducible: file times, the creation time and the history
// are fixed (SOURCE_DATE_EPOCH when set, else the Unix epoch), so the same
// binaries and metadata give the same digest. Archives are written in the
// `docker save` layout that `ctr images import` and `docker load` read, to
// bin/images/<name>.tar by `make images`, each tagged eurekube/<name>:<tag>.
// The Dockerfile builds the same shape for Docker users; a test keeps the
// two in step.
//
// One test image is not Eurekube's and not static: JVMArchive (jvm.go)
// packs a Spring Boot jar with a runtime jlinked from the host's JDK and
// the shared libraries it loads, in two layers (runtime, then jar), for the
// Spring Cloud Kubernetes app of the end-to-end suite; it is cached under
// $EUREKUBE_CACHE/images by the jar's and runtime's contents.
package images
