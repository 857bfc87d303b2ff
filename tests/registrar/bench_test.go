package registrar_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// BenchmarkRegistrar_StartToVisible measures the latency from process start
// to the instance being readable on the server, and from SIGTERM to the
// instance being gone.
func BenchmarkRegistrar_StartToVisible(b *testing.B) {
	ctx := context.Background()
	c, err := eureka.New(eureka.Options{URLs: []string{server.URL()}})
	if err != nil {
		b.Fatal(err)
	}
	var visible, gone time.Duration
	for i := 0; i < b.N; i++ {
		app := harness.AppT(b, false)
		p := startRegistrar(b, envOf(injectedSettings("bench", app.Port, server.URL())))
		start := time.Now()
		waitB(b, 10*time.Second, func() bool { _, err := c.Instance(ctx, p.app, p.instanceID()); return err == nil })
		visible += time.Since(start)
		_ = p.Signal(syscall.SIGTERM)
		start = time.Now()
		waitB(b, 5*time.Second, func() bool {
			_, err := c.Instance(ctx, p.app, p.instanceID())
			return errors.Is(err, eureka.ErrNotFound)
		})
		gone += time.Since(start)
		<-p.Done()
	}
	b.ReportMetric(float64(visible.Milliseconds())/float64(b.N), "ms-start-to-visible")
	b.ReportMetric(float64(gone.Microseconds())/1000/float64(b.N), "ms-sigterm-to-gone")
}

// BenchmarkRegistrar_Footprint reports the binary size, the RSS after being
// registered for BENCH_RSS_WINDOW (default 60s), and the CPU time per
// heartbeat over that window (1 s renewal interval, 1 s health period).
func BenchmarkRegistrar_Footprint(b *testing.B) {
	window := 60 * time.Second
	if v := os.Getenv("BENCH_RSS_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("BENCH_RSS_WINDOW=%q: %v", v, err)
		}
		window = d
	}
	info, err := os.Stat(registrarBin)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, err := eureka.New(eureka.Options{URLs: []string{server.URL()}})
	if err != nil {
		b.Fatal(err)
	}
	app := harness.AppT(b, true)
	s := injectedSettings("footprint", app.Port, server.URL())
	s.Health.Period = time.Second
	p := startRegistrar(b, envOf(s))
	waitB(b, 10*time.Second, func() bool {
		inst, err := c.Instance(ctx, p.app, p.instanceID())
		return err == nil && inst.Status == eureka.StatusUp
	})
	cpu0 := cpuTime(b, p.Pid())
	beats0 := metric(b, p, `eurekube_registrar_heartbeats_total{result="ok"}`)
	time.Sleep(window) // the measurement window itself, not a wait for a condition
	cpu1 := cpuTime(b, p.Pid())
	beats := metric(b, p, `eurekube_registrar_heartbeats_total{result="ok"}`) - beats0
	rss := rssKiB(b, p.Pid())
	b.ReportMetric(float64(info.Size())/(1<<20), "MiB-binary")
	b.ReportMetric(float64(rss)/1024, "MiB-RSS")
	if beats > 0 {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/beats/1000, "ms-CPU/heartbeat")
	}
	b.ReportMetric(beats*60/window.Seconds(), "heartbeats/min")
	_ = p.Signal(syscall.SIGTERM)
	<-p.Done()
}

func waitB(b *testing.B, timeout time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cpuTime is the process's user+system CPU time from /proc/PID/stat.
func cpuTime(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ is 100 on Linux
}

func rssKiB(b *testing.B, pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
