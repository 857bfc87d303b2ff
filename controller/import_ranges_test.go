package controller

import (
	"math/rand/v2"
	"testing"
)

// The hint from Service default/kubernetes: any Service range the API
// server accepts (at most 20 bits) that holds the ClusterIP lies inside
// the widened range.
func TestImportRanges_TheWidenedClusterIPHoldsEveryServiceRangeThatCouldHoldIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 5))
	for i := 0; i < 5000; i++ {
		bits := 32
		if rng.IntN(2) == 0 {
			bits = 128
		}
		real, _ := randomAddr(rng, bits).Prefix(bits - maxServiceRangeBits + rng.IntN(maxServiceRangeBits-1))
		clusterIP := inside(rng, real)
		got := widenedClusterIPs([]string{clusterIP.String()})
		if len(got) != 1 || !got[0].prefix.Contains(real.Addr()) || got[0].prefix.Bits() > real.Bits() {
			t.Fatalf("ClusterIP %s of range %s: widened to %+v", clusterIP, real, got)
		}
	}
	if got := widenedClusterIPs([]string{"10.96.0.1", "fd00:10:96::1"}); got[0].prefix.String() != "10.96.0.0/12" || got[1].prefix.String() != "fd00:10:96::/108" {
		t.Errorf("widened %+v", got)
	}
}
