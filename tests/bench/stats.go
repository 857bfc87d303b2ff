package bench

import (
	"math"
	"sort"
	"time"
)

// Durations is a sample of latencies.
type Durations []time.Duration

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100), or 0
// for an empty sample.
func (d Durations) Percentile(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append(Durations(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}

// Max is the largest value, or 0 for an empty sample.
func (d Durations) Max() time.Duration {
	var m time.Duration
	for _, v := range d {
		m = max(m, v)
	}
	return m
}

// ms converts a duration to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
