package harness

import (
	"testing"
	"time"
)

// Eventually polls cond every 50 ms until it returns nil, and fails the test
// with what and cond's last error when timeout passes first. Tests wait for
// conditions with it, never for a fixed time.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
