package bench

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/eurekube/eurekube/tests/harness"
)

// The processes of one scale run whose CPU the report accounts for: the
// first pass is the work of all of them, on the machine's shared cores.

// processCPU is the CPU time of named processes.
type processCPU struct {
	names []string
	pids  []int
}

// runProcesses finds the API server and etcd of cp and the Eureka server
// listening on eurekaAddr, beside the manager's pid, by their command
// lines.
func runProcesses(cp *harness.ControlPlane, eurekaAddr string, managerPid int) processCPU {
	p := processCPU{names: []string{"manager"}, pids: []int{managerPid}}
	u, err := url.Parse(cp.Config.Host)
	if err != nil {
		return p
	}
	cmdlines := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil {
			cmdlines[pid] = strings.ReplaceAll(string(raw), "\x00", " ")
		}
	}
	find := func(name string, match func(string) bool) {
		for pid, line := range cmdlines {
			if match(line) {
				p.names, p.pids = append(p.names, name), append(p.pids, pid)
				return
			}
		}
	}
	var etcdURL string
	find("kube-apiserver", func(line string) bool {
		if !strings.Contains(line, "kube-apiserver") || !strings.Contains(line, "--secure-port="+u.Port()+" ") {
			return false
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "--etcd-servers="); ok {
				etcdURL = v
			}
		}
		return true
	})
	if etcdURL != "" {
		find("etcd", func(line string) bool {
			return strings.Contains(line, "etcd") && strings.Contains(line, "--listen-client-urls="+etcdURL)
		})
	}
	if _, port, ok := strings.Cut(eurekaAddr, ":"); ok {
		find("Eureka (JVM)", func(line string) bool {
			return strings.HasPrefix(line, "java ") && strings.Contains(line, "--server.port="+port+" ")
		})
	}
	return p
}

// read is each process's CPU time now; a process gone reads 0.
func (p processCPU) read() []time.Duration {
	out := make([]time.Duration, len(p.pids))
	for i, pid := range p.pids {
		out[i], _ = CPUTime(pid)
	}
	return out
}

// describe says how much CPU each process used between before and after,
// and over how long.
func (p processCPU) describe(before, after []time.Duration, over time.Duration) string {
	parts := make([]string, 0, len(p.names))
	var total time.Duration
	for i, name := range p.names {
		d := after[i] - before[i]
		total += d
		parts = append(parts, fmt.Sprintf("%s %s s", name, formatValue(d.Seconds())))
	}
	return fmt.Sprintf("CPU used in those %s s: %s (%s s in all, %s of the machine's cores busy on average)",
		formatValue(over.Seconds()), strings.Join(parts, ", "), formatValue(total.Seconds()), formatValue(total.Seconds()/over.Seconds()))
}
