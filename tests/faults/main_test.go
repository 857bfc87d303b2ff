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
	bin, cleanup, err := harness.BuildTemp("./cmd/registrar")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	registrarBin = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}
