package bench

import (
	"testing"
	"time"
)

func TestPercentile_IsTheNearestRank(t *testing.T) {
	var d Durations
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := d.Percentile(tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := (Durations{}).Percentile(99); got != 0 {
		t.Errorf("empty p99 = %v, want 0", got)
	}
}
