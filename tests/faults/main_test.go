package faults

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/eurekube/eurekube/tests/harness"
)

// Built once for the suite.
var registrarBin, managerBin string

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // envtest's own chatter
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "eurekube-faults-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if registrarBin, err = harness.BuildBinary("./cmd/registrar", dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if managerBin, err = harness.BuildBinary("./cmd/manager", dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}
