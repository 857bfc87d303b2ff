//go:build race

package harness

// RaceDetector says whether this test binary was built with -race.
const RaceDetector = true
