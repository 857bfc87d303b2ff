package bench

import (
	"context"
	"fmt"
	"time"
)

// waitFor polls cond every poll until it returns nil, ctx ends or timeout
// passes; the error then says what did not happen and cond's last error.
func waitFor(ctx context.Context, timeout, poll time.Duration, what string, cond func() error) error {
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
