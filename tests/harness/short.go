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

// OnlyComputes marks a test that starts no goroutine and only computes (a
// property test of a pure function, archives written and read back): the
// race detector can find nothing in it and makes it several times slower,
// so under -race it is skipped. It must be the test's first line: make
// test's runner finds the tests that begin with it and runs them without
// the detector, in a job of their own (tests/tools/testrun), with
// OnlyComputesEnv set; make unit runs those that need only Go. The import
// plan's properties took 456 s of the controller suite's 1,048 under
// -race, and about 65 CPU-s without it; the images suite 121 CPU-s, and
// 32 without.
func OnlyComputes(t testing.TB) {
	t.Helper()
	if RaceDetector {
		t.Skip("only computes, starts no goroutine: runs without the race detector (make test's job of such tests; make unit)")
	}
}

// OnlyComputesEnv is set to 1 in the job of make test that runs only the
// tests marked OnlyComputes: a TestMain need not start what only its
// other tests use (an API server, a Eureka server).
const OnlyComputesEnv = "EUREKUBE_ONLY_COMPUTES"

// OnlyComputesRun says whether this is that job.
func OnlyComputesRun() bool { return os.Getenv(OnlyComputesEnv) == "1" }

// SpareCPUEnv names, in make test, a file holding the CPU time of the cpu
// cgroup testrun runs its other lanes in, with few shares (testrun's
// -rest-shares): cgroup v1's cpuacct.usage (nanoseconds) or v2's cpu.stat
// (usage_usec). What that group uses the node's suites may take, so the
// end-to-end suite's story gate counts it as spare, as it counts idle time.
const SpareCPUEnv = "EUREKUBE_SPARE_CPU"
