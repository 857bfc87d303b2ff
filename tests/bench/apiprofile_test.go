package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestReadAPIServerCPU_SortsSamplesByWorkAndCostsEachWrite writes a CPU
// profile with the stacks the kube-apiserver's handlers have, and reads
// back each kind of work's CPU and the cost of one request of it.
func TestReadAPIServerCPU_SortsSamplesByWorkAndCostsEachWrite(t *testing.T) {
	fn := map[string]*profile.Function{}
	loc := func(names ...string) []*profile.Location {
		var out []*profile.Location
		for _, n := range names {
			if fn[n] == nil {
				fn[n] = &profile.Function{ID: uint64(len(fn) + 1), Name: n}
			}
			out = append(out, &profile.Location{ID: uint64(len(fn)*10 + len(out) + 1), Line: []profile.Line{{Function: fn[n]}}})
		}
		return out
	}
	ms := int64(time.Millisecond)
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		DurationNanos: int64(20 * time.Second),
		// Frames as kube-apiserver v1.36 names them.
		Sample: []*profile.Sample{
			{Location: loc("encoding/json.Marshal", "k8s.io/apiextensions-apiserver/pkg/registry/customresource.(*StatusREST).Update", "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).ServeHTTP"), Value: []int64{1, 400 * ms}},
			{Location: loc("k8s.io/apiserver/pkg/endpoints/handlers.(*patcher).applyPatch", "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).serveStatus.PatchResource.func3"), Value: []int64{1, 100 * ms}},
			{Location: loc("k8s.io/apiserver/pkg/endpoints/handlers.getResourceHandler", "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).serveStatus.GetResource.func1"), Value: []int64{1, 5 * ms}},
			{Location: loc("k8s.io/apiserver/pkg/storage/etcd3.(*store).GuaranteedUpdate", "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).serveResource.UpdateResource.func4.4"), Value: []int64{1, 250 * ms}},
			{Location: loc("k8s.io/apiserver/pkg/endpoints/handlers.createHandler", "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).serveResource", "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).ServeHTTP"), Value: []int64{1, 50 * ms}},
			{Location: loc("k8s.io/apiserver/pkg/storage/etcd3.(*store).Create", "k8s.io/apiserver/pkg/endpoints.(*APIInstaller).registerResourceHandlers.restfulCreateNamedResource.func1.createHandler.func1"), Value: []int64{1, 120 * ms}},
			{Location: loc("k8s.io/apiserver/pkg/endpoints/handlers.(*patcher).patchResource", "k8s.io/apiserver/pkg/endpoints.(*APIInstaller).registerResourceHandlers.restfulPatchResource.func1.PatchResource.func2"), Value: []int64{1, 80 * ms}},
			{Location: loc("k8s.io/apiserver/pkg/endpoints/handlers.(*WatchServer).HandleHTTP", "k8s.io/apiserver/pkg/endpoints/handlers.handleWatch", "k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).serveResource.ListResource.func3"), Value: []int64{1, 30 * ms}},
			{Location: loc("k8s.io/apiserver/pkg/storage/etcd3.decodeObj", "k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).transform"), Value: []int64{1, 50 * ms}},
			{Location: loc("runtime.scanobject", "runtime.gcBgMarkWorker"), Value: []int64{1, 70 * ms}},
			{Location: loc("syscall.Syscall6"), Value: []int64{1, 10 * ms}},
		},
	}
	p.Function = nil
	for _, f := range fn {
		p.Function = append(p.Function, f)
	}
	for _, s := range p.Sample {
		p.Location = append(p.Location, s.Location...)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cpu.prof")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := readAPIServerCPU(file)
	if err != nil {
		t.Fatal(err)
	}
	c.requests = apiRequests{"PATCH eurekasyncers/status": 100, "PUT eurekasyncers": 50, "POST services": 40, "GET pods": 7}
	for work, want := range map[string]time.Duration{
		"status writes of custom resources": 500 * time.Millisecond,
		"other writes of custom resources":  300 * time.Millisecond,
		"writes of built-in resources":      200 * time.Millisecond,
		"watch events decoded from etcd":    50 * time.Millisecond,
		"watches served":                    30 * time.Millisecond,
		"reads":                             5 * time.Millisecond,
		"garbage collection":                70 * time.Millisecond,
		"other":                             10 * time.Millisecond,
	} {
		if got := c.byWork[work]; got != want {
			t.Errorf("%s: %v, want %v", work, got, want)
		}
	}
	got := c.String()
	for _, want := range []string{"over the first 20s after /readyz: 1.17 s", "status writes of custom resources 0.500 s for 100 requests (5.00 ms each)",
		"other writes of custom resources 0.300 s for 50.0 requests (6.00 ms each)", "writes of built-in resources 0.200 s for 40.0 requests (5.00 ms each)", "other 0.010 s"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	// The writes of a whole pass, each at its kind's cost: 200 status
	// writes at 5 ms, 10 other custom-resource writes at 6 ms, 30
	// built-in ones at 5 ms.
	cpu, ok := c.writesCPU(apiRequests{"PATCH eurekasyncers/status": 200, "PUT eurekasyncers": 4, "POST eurekaappclaims": 6, "POST endpointslices": 30})
	if want := 1000*time.Millisecond + 60*time.Millisecond + 150*time.Millisecond; !ok || cpu.Round(time.Millisecond) != want {
		t.Errorf("writesCPU: %v (%v), want %v", cpu, ok, want)
	}
	// A kind of write the profile's window served none of has no cost.
	c.requests = apiRequests{"PATCH eurekasyncers/status": 100}
	if _, ok := c.writesCPU(apiRequests{"POST services": 1}); ok {
		t.Error("writesCPU costed a kind of write the window never served")
	}
}
