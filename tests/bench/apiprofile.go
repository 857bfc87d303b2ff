package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/eurekube/eurekube/tests/harness"
)

// apiWork is a kind of work the kube-apiserver does, as its CPU profile
// shows it, and which of the requests counted beside it that work serves.
type apiWork struct {
	name string
	// A sample is this work when a function of its stack contains one of
	// frames, or is named one of exact. The kinds are tried in order: the
	// first that matches takes the sample. The names are the compiler's,
	// closures and inlined calls included (an inlined handler's closure is
	// named after its caller: restfulPatchResource.func1.PatchResource…).
	frames, exact []string
	// serves says whether a request counted ("PATCH eurekasyncers/status")
	// is of this work: its CPU divided by their number is the cost of
	// one. Nil: the work serves no request counted (a watch, the GC).
	serves func(request string) bool
}

// customResource says whether resource is one of Eurekube's own (served
// through the API server's custom resource handler): every kind of
// api/v1alpha1 is Eureka…, so its plural is eureka….
func customResource(resource string) bool { return strings.HasPrefix(resource, "eureka") }

// apiWorks are the kinds the bench tells apart. A custom resource's
// write is decoded, defaulted, validated (schema and CEL), tracked in its
// managed fields and encoded as unstructured JSON; a built-in's, as a
// typed object.
var apiWorks = []apiWork{
	{name: "garbage collection", frames: []string{"runtime.gcBgMarkWorker"}},
	{name: "status writes of custom resources", frames: []string{"customresource.(*StatusREST).Update", "(*crdHandler).serveStatus.PatchResource", "(*crdHandler).serveStatus.UpdateResource"},
		serves: func(r string) bool {
			return isWrite(r) && strings.Contains(r, "/status") && customResource(resourceOf(r))
		}},
	{name: "other writes of custom resources", frames: []string{"(*crdHandler).serveResource.UpdateResource", "(*crdHandler).serveResource.PatchResource", "(*crdHandler).serveResource.CreateResource", "(*crdHandler).serveResource.DeleteResource"},
		// Building a create's handler (createHandler inlined) runs in
		// serveResource itself.
		exact: []string{"k8s.io/apiextensions-apiserver/pkg/apiserver.(*crdHandler).serveResource"},
		serves: func(r string) bool {
			return isWrite(r) && !strings.Contains(r, "/status") && customResource(resourceOf(r))
		}},
	{name: "writes of built-in resources", frames: []string{"restfulCreateResource", "restfulCreateNamedResource", "restfulUpdateResource", "restfulPatchResource", "restfulDeleteResource", "restfulDeleteCollection"},
		serves: func(r string) bool { return isWrite(r) && !customResource(resourceOf(r)) }},
	{name: "watch events decoded from etcd", frames: []string{"etcd3.(*watchChan)"}},
	{name: "watches served", frames: []string{"endpoints/handlers.handleWatch", "endpoints/handlers.(*WatchServer)", "endpoints/handlers.serveWatchHandler", "cacher.(*cacheWatcher)"}},
	{name: "reads", frames: []string{"restfulListResource", "restfulGetResource", "serveResource.ListResource", "serveResource.GetResource", "serveStatus.GetResource"}},
}

// isWrite says whether request ("PATCH pods") is of a write verb.
func isWrite(request string) bool {
	verb, _, _ := strings.Cut(request, " ")
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

// resourceOf is "eurekasyncers" of "PATCH eurekasyncers/status".
func resourceOf(request string) string {
	_, r, _ := strings.Cut(request, " ")
	r, _, _ = strings.Cut(r, "/")
	return r
}

// apiServerCPU is what the kube-apiserver's CPU profile over part of a
// pass shows, beside the requests it served meanwhile.
type apiServerCPU struct {
	window   time.Duration
	total    time.Duration
	byWork   map[string]time.Duration
	requests apiRequests // served during the profile
}

// profileAPIServer profiles the kube-apiserver for d, saving the profile
// to file, and counts the requests it served meanwhile.
func profileAPIServer(ctx context.Context, cp *harness.ControlPlane, d time.Duration, file string) (apiServerCPU, error) {
	before, err := readAPIRequests(ctx, cp)
	if err != nil {
		return apiServerCPU{}, err
	}
	if err := apiServerProfile(ctx, cp, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), file); err != nil {
		return apiServerCPU{}, err
	}
	after, err := readAPIRequests(ctx, cp)
	if err != nil {
		return apiServerCPU{}, err
	}
	c, err := readAPIServerCPU(file)
	c.requests = after.sub(before)
	return c, err
}

// readAPIServerCPU sorts a kube-apiserver CPU profile's samples into
// apiWorks.
func readAPIServerCPU(file string) (apiServerCPU, error) {
	f, err := os.Open(file)
	if err != nil {
		return apiServerCPU{}, fmt.Errorf("kube-apiserver profile: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return apiServerCPU{}, fmt.Errorf("kube-apiserver profile %s: %w", file, err)
	}
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			cpu = i
		}
	}
	if cpu < 0 {
		return apiServerCPU{}, fmt.Errorf("kube-apiserver profile %s: no cpu nanoseconds", file)
	}
	c := apiServerCPU{window: time.Duration(p.DurationNanos), byWork: map[string]time.Duration{}}
	for _, s := range p.Sample {
		d := time.Duration(s.Value[cpu])
		c.total += d
		c.byWork[workOf(s)] += d
	}
	return c, nil
}

// workOf is the name of the first apiWork a sample's stack matches, or
// "other".
func workOf(s *profile.Sample) string {
	for _, w := range apiWorks {
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				if slices.Contains(w.exact, name) || slices.ContainsFunc(w.frames, func(fr string) bool { return strings.Contains(name, fr) }) {
					return w.name
				}
			}
		}
	}
	return "other"
}

// String says where the API server's CPU went, and what one request of
// each kind of write cost.
func (c apiServerCPU) String() string {
	if c.total == 0 {
		return "no profile of the kube-apiserver"
	}
	parts := []string{}
	for _, w := range apiWorks {
		d := c.byWork[w.name]
		if d == 0 {
			continue
		}
		part := fmt.Sprintf("%s %s s", w.name, formatValue(d.Seconds()))
		if w.serves != nil {
			if n := c.served(w); n > 0 {
				part += fmt.Sprintf(" for %s requests (%s ms each)", formatValue(n), formatValue(d.Seconds()*1000/n))
			}
		}
		parts = append(parts, part)
	}
	parts = append(parts, fmt.Sprintf("other %s s", formatValue(c.byWork["other"].Seconds())))
	return fmt.Sprintf("the kube-apiserver's CPU profile over the first %s after /readyz: %s s, of which %s",
		c.window.Round(time.Second), formatValue(c.total.Seconds()), strings.Join(parts, ", "))
}

// writesCPU is what writes would cost the API server at the per-request
// cost of each kind of write its profile measured: the handling of the
// write itself, without the watch events and garbage it makes. ok is
// false when the profile holds no request of a kind writes has.
func (c apiServerCPU) writesCPU(writes apiRequests) (cpu time.Duration, ok bool) {
	for r, n := range writes {
		w, found := workServing(r)
		if !found {
			return 0, false
		}
		served := c.served(w)
		if served == 0 {
			return 0, false
		}
		cpu += time.Duration(float64(c.byWork[w.name]) / served * n)
	}
	return cpu, true
}

// workServing is the kind of work that serves request.
func workServing(request string) (apiWork, bool) {
	for _, w := range apiWorks {
		if w.serves != nil && w.serves(request) {
			return w, true
		}
	}
	return apiWork{}, false
}

// served is how many of the requests counted during the profile w served.
func (c apiServerCPU) served(w apiWork) float64 {
	var n float64
	for r, v := range c.requests {
		if w.serves(r) {
			n += v
		}
	}
	return n
}
