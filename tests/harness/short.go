package harness

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// The test tiers: `make unit` runs `go test -short ./...`, the tests that
// need nothing but Go, in seconds; `make test` runs everything. Tests and
// suites that start real parts (an API server, a Eureka server, a node,
// image builds) skip themselves in -short mode through these two.

// SkipSuiteWhenShort ends a TestMain at once, successfully, in -short
// mode, saying what the suite needs. It parses the test flags.
func SkipSuiteWhenShort(needs string) {
	flag.Parse()
	if testing.Short() {
		fmt.Printf("skipped in -short mode (make unit): the suite needs %s\n", needs)
		os.Exit(0)
	}
}

// SkipWhenShort skips t in -short mode, saying what it needs.
func SkipWhenShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped in -short mode (make unit): needs %s", needs)
	}
}
