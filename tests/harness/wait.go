package harness

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Eventually polls cond until it returns nil, and fails the test with what
// and cond's last error when timeout passes first. Tests wait for
// conditions with it, never for a fixed time.
//
// It polls at once, then every 50 ms, backing off by a quarter each time up
// to every 500 ms (after about 3.5 s): what happens at once is seen at
// once, and a long wait (a rollout, a lease, a resync) costs a poll every
// half second instead of twenty a second. A poll lists pods or reads
// Eureka; two hundred call sites polling at a fixed 50 ms were a good part
// of a run's CPU.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := eventuallyFirst
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(min(pause, max(time.Until(deadline), time.Millisecond)))
		pause = min(pause+pause/4, eventuallyMost)
	}
}

// Eventually's first pause and its longest.
const (
	eventuallyFirst = 50 * time.Millisecond
	eventuallyMost  = 500 * time.Millisecond
)

// Poll calls cond every poll until it returns nil, ctx ends or timeout
// passes; the error then says what did not happen and cond's last error.
// It is Eventually for code that reports errors instead of failing a test:
// the harness's parts, the sandbox and the bench.
func Poll(ctx context.Context, timeout, poll time.Duration, what string, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %s: %w", what, timeout, err)
		case <-tick.C:
		}
	}
}
