// Command nodeclean restores the host after a test node that was killed
// before its teardown (go test -timeout, kill -9): it stops the containers
// and shims left behind, unmounts, deletes cni0 and eknode0, removes the
// node's iptables chains and cgroups, and restores the sysctls the node's
// state file recorded. Run it as root; the next node start does the same.
package main

import (
	"fmt"
	"os"

	"github.com/eurekube/eurekube/tests/node"
)

func main() {
	if err := node.Clean(node.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "nodeclean:", err)
		os.Exit(1)
	}
}
