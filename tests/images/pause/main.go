// Command pause is the kubelet's sandbox ("pause") process for the test
// node: it holds a pod's namespaces open and does nothing else, exiting 0
// on SIGTERM or SIGINT. The real node runs it from the eurekube/pause image
// so that no image is ever pulled from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
}
