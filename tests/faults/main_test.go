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
	// One port for every registrar, each on a loopback IP of its own (as
	// each pod has its own IP): picked free on every address, so another
	// run of this suite on the machine (two make test at once) picks
	// another. Picked first, so that a failure leaves no built binary.
	var err error
	if listenPort, err = harness.FreePort(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
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
