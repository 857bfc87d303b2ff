package main

import "testing"

// TestCoordinatorDeadline_OnlyTheBareDeadlineWithoutAnInput tells Go's
// fuzzing coordinator's own deadline (golang/go#75804; the first output is
// a cold make test's, beside a CPU-bound job, at f4c0a9e) from a target's
// real failures.
func TestCoordinatorDeadline_OnlyTheBareDeadlineWithoutAnInput(t *testing.T) {
	const target = "FuzzInject_ConvergesAfterALaterWebhook"
	for _, c := range []struct {
		name, output string
		want         bool
	}{
		{"the coordinator's deadline", `fuzz: elapsed: 9s, execs: 3062 (856/sec), new interesting: 4 (total: 72)
fuzz: elapsed: 11s, execs: 3062 (0/sec), new interesting: 4 (total: 72)
--- FAIL: FuzzInject_ConvergesAfterALaterWebhook (11.03s)
    context deadline exceeded
FAIL
exit status 1
FAIL	github.com/eurekube/eurekube/webhook	11.091s
`, true},
		{"a finding", `--- FAIL: FuzzInject_ConvergesAfterALaterWebhook (0.52s)
    --- FAIL: FuzzInject_ConvergesAfterALaterWebhook (0.00s)
        mutate_fuzz_test.go:40: not converged

    Failing input written to testdata/fuzz/FuzzInject_ConvergesAfterALaterWebhook/582528ddfad69eb5
    To re-run:
    go test -run=FuzzInject_ConvergesAfterALaterWebhook/582528ddfad69eb5
FAIL
`, false},
		{"a hung target", `--- FAIL: FuzzInject_ConvergesAfterALaterWebhook (13.10s)
    fuzzing process hung or terminated unexpectedly: exit status 2
    Failing input written to testdata/fuzz/FuzzInject_ConvergesAfterALaterWebhook/0d2e
FAIL
`, false},
		{"another target's deadline", `--- FAIL: FuzzInject_IsIdempotent (11.03s)
    context deadline exceeded
FAIL
`, false},
		{"the target's own deadline error, with more after it", `--- FAIL: FuzzInject_ConvergesAfterALaterWebhook (0.10s)
    context deadline exceeded
    mutate_fuzz_test.go:12: the API server did not answer
FAIL
`, false},
	} {
		if got := coordinatorDeadline(c.output, target); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
