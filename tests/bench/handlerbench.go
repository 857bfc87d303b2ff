package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/eurekube/eurekube/tests/harness"
)

// handlerBenchmarkOps is how many requests BenchmarkHandler serves.
const handlerBenchmarkOps = 5000

// benchmarkLine is one result of go test -bench -benchmem: the name, ns/op,
// B/op and allocs/op.
var benchmarkLine = regexp.MustCompile(`(?m)^(Benchmark\w+)\S*\s+\d+\s+([\d.]+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op`)

// benchmarkResult is one benchmark's cost per operation.
type benchmarkResult struct {
	ns            float64
	bytes, allocs int
}

// handlerBenchmarks are BenchmarkHandler and, when the tree has it, its
// anchor BenchmarkPrecomputedHandler, as one tree measured them.
type handlerBenchmarks struct {
	handler, floor benchmarkResult
	hasFloor       bool
}

// ownWork is the handler's time per request less the server's alone.
func (h handlerBenchmarks) ownWork() float64 { return h.handler.ns - h.floor.ns }

// measureHandlerBenchmark runs webhook's BenchmarkHandler, the handler in
// process through the informer cache the manager reads, beside its anchor
// BenchmarkPrecomputedHandler (the same server code answering with the
// patch computed once), and adds the time and allocations per request.
// When before is set the same benchmarks run right after in a git worktree
// of that older commit, so both trees are measured under the same load;
// its figures stand in the anchors.
func measureHandlerBenchmark(ctx context.Context, before, workDir string, r *Results) (err error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	var beforeCommit string
	var tree string
	if before != "" {
		if beforeCommit, err = shortCommit(root, before); err != nil {
			return err
		}
		// The worktree is made before this tree's run, so the two runs
		// follow each other with nothing between them.
		tree = filepath.Join(workDir, "tree-handler-"+beforeCommit)
		if err := addWorktree(root, beforeCommit, tree); err != nil {
			return err
		}
		defer func() {
			if rmErr := removeWorktree(root, tree); rmErr != nil && err == nil {
				err = rmErr
			}
		}()
	}
	now, err := runHandlerBenchmarks(ctx, root)
	if err != nil {
		return err
	}
	if !now.hasFloor {
		return fmt.Errorf("BenchmarkHandler: no BenchmarkPrecomputedHandler in this tree's webhook package")
	}
	var old *handlerBenchmarks
	if before != "" {
		o, err := runHandlerBenchmarks(ctx, tree)
		if err != nil {
			return fmt.Errorf("at %s: %w", beforeCommit, err)
		}
		old = &o
	}
	addHandlerBenchmarkFigures(r, now, old, beforeCommit)
	return nil
}

// runHandlerBenchmarks runs BenchmarkHandler and BenchmarkPrecomputedHandler
// of the tree at dir and parses their results; a tree without
// BenchmarkPrecomputedHandler (an older commit) gives BenchmarkHandler alone.
func runHandlerBenchmarks(ctx context.Context, dir string) (handlerBenchmarks, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^Benchmark(Handler|PrecomputedHandler)$", "-benchmem",
		"-benchtime", strconv.Itoa(handlerBenchmarkOps)+"x", "-count", "1", "./webhook/")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return handlerBenchmarks{}, fmt.Errorf("BenchmarkHandler: %w: %.500s", err, out)
	}
	return parseHandlerBenchmarks(out)
}

// parseHandlerBenchmarks reads the output of go test -bench -benchmem.
func parseHandlerBenchmarks(out []byte) (handlerBenchmarks, error) {
	results := map[string]benchmarkResult{}
	for _, m := range benchmarkLine.FindAllSubmatch(out, -1) {
		var b benchmarkResult
		b.ns, _ = strconv.ParseFloat(string(m[2]), 64)
		b.bytes, _ = strconv.Atoi(string(m[3]))
		b.allocs, _ = strconv.Atoi(string(m[4]))
		results[string(m[1])] = b
	}
	var h handlerBenchmarks
	var ok bool
	if h.handler, ok = results["BenchmarkHandler"]; !ok {
		return h, fmt.Errorf("BenchmarkHandler: not in its output: %.500s", out)
	}
	h.floor, h.hasFloor = results["BenchmarkPrecomputedHandler"]
	return h, nil
}

// addHandlerBenchmarkFigures adds the handler's figures of this tree, with
// old, the older commit's from the same run, in the anchors when set.
func addHandlerBenchmarkFigures(r *Results, now handlerBenchmarks, old *handlerBenchmarks, oldCommit string) {
	us := func(ns float64) string { return formatValue(ns / 1000) }
	var oldTime, oldAllocs, oldWhy string
	if old != nil {
		own := ""
		if old.hasFloor {
			own = fmt.Sprintf(" (its own work %s µs)", us(old.ownWork()))
		}
		oldTime = fmt.Sprintf("; at %s in this run: %s µs%s, %d allocs", oldCommit, us(old.handler.ns), own, old.handler.allocs)
		oldAllocs = fmt.Sprintf("; at %s in this run: %d", oldCommit, old.handler.allocs)
		oldWhy = fmt.Sprintf(" (%s µs at %s in this run)", us(old.ownWork()), oldCommit)
		if !old.hasFloor {
			oldWhy = fmt.Sprintf(" (the whole handler at %s in this run: %s µs)", oldCommit, us(old.handler.ns))
		}
	}
	method := fmt.Sprintf("go test -bench '^Benchmark(Handler|PrecomputedHandler)$' -benchmem -benchtime %dx ./webhook/: the Spring Boot pod with a readinessProbe (the bench pod) as a real AdmissionReview through controller-runtime's admission.Webhook (decoding the review, encoding the answer), the namespace and syncers read from controller-runtime's informer cache (filled from objects, no API server), Inject and the JSON patch; the anchor is the same request through the same admission.Webhook answered with the patch computed once. With an older commit (BENCH_BEFORE) the same command runs right after in a git worktree of it (BenchmarkHandler alone if it has no BenchmarkPrecomputedHandler), for its figures in the anchors. One process, GOMAXPROCS = the machine's cores, beside whatever else runs on them (the load table above); run before the phase starts its control plane.", handlerBenchmarkOps)
	r.Add(Figure{
		ID: "webhook.handler_us_per_op", Section: SectionWebhook, Name: "handler in process, time per request",
		Value: now.handler.ns / 1000, Unit: "µs", Target: Max(100),
		Anchor: fmt.Sprintf("controller-runtime's server alone, answering the precomputed patch: %s µs, so Eurekube's own work is %s µs; %d B allocated per request%s",
			us(now.floor.ns), us(now.ownWork()), now.handler.bytes, oldTime),
		Method: method,
		IfMissed: fmt.Sprintf("of the %s µs per request, controller-runtime's server alone takes %s µs and Eurekube's own work %s µs%s; most of the request is JSON: controller-runtime decoding the AdmissionReview (its deserializer scans the pod's bytes twice), the pod decoded once, the registrar container encoded into the patch and the answer encoded; the rest is the mutation itself and its garbage collection, which takes the second core; other processes busy on the machine (the load table) lengthen it",
			us(now.handler.ns), us(now.floor.ns), us(now.ownWork()), oldWhy),
	})
	r.Add(Figure{
		ID: "webhook.handler_allocs_per_op", Section: SectionWebhook, Name: "handler in process, allocations per request",
		Value: float64(now.handler.allocs), Unit: "allocs", Target: Max(400),
		Anchor: fmt.Sprintf("controller-runtime's server alone: %d%s", now.floor.allocs, oldAllocs),
	})
}
