package sidecar

import (
	"errors"
	"testing"
)

func TestGate_NeedsThresholdsToFlip(t *testing.T) {
	fail := errors.New("down")
	g := NewGate(2, 3)
	steps := []struct {
		err  error
		want bool
	}{
		{nil, false}, {nil, true}, // two successes to become healthy
		{fail, true}, {fail, true}, {nil, true}, // a success resets the failures
		{fail, true}, {fail, true}, {fail, false}, // three failures in a row
		{nil, false}, {nil, true},
	}
	for i, s := range steps {
		if got := g.Observe(s.err); got != s.want {
			t.Fatalf("step %d: healthy = %v, want %v", i, got, s.want)
		}
	}
}
