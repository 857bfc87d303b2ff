package faults

import (
	"fmt"
	"os"
	"testing"

	"github.com/eurekube/eurekube/tests/harness"
)

// Built once for the suite.
var registrarBin string

func TestMain(m *testing.M) {
	harness.SkipSuiteWhenShort("a Eureka server and 200 registrar processes")
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
		return m.Run()
	}())
}
