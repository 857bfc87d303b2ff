package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Environment is the machine and the versions a run measured.
type Environment struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`

	Go         string `json:"go"`
	Java       string `json:"java"`
	Kubernetes string `json:"kubernetes"`
	Etcd       string `json:"etcd"`
	Eureka     string `json:"eureka"`
	Commit     string `json:"commit"`
	// Dirty: the tree had uncommitted changes to tracked files.
	Dirty bool `json:"dirty,omitempty"`

	// Load is what else ran: the load average and busy processes outside
	// the run, sampled at the start and at the end of each phase.
	Load []LoadSample `json:"load"`
}

// LoadSample is the machine's load at one moment of the run.
type LoadSample struct {
	When string `json:"when"`
	// LoadAvg1 is the one-minute load average.
	LoadAvg1 float64 `json:"loadavg1"`
	// Others are processes outside this run that used more than 10 % of a
	// core over one second, as "name 85%".
	Others []string `json:"others,omitempty"`
}

// DescribeEnvironment reads the machine and the versions of what the run
// uses; what cannot be read is "unknown".
func DescribeEnvironment(root string) Environment {
	e := Environment{Cores: runtime.NumCPU(), Go: runtime.Version()}
	e.CPU = firstMatch("/proc/cpuinfo", regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`))
	if kb, err := strconv.ParseFloat(firstMatch("/proc/meminfo", regexp.MustCompile(`(?m)^MemTotal:\s*(\d+) kB`)), 64); err == nil {
		e.MemoryGiB = kb / (1 << 20)
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = strings.TrimSpace(string(data))
	}
	if out, err := exec.Command("java", "-version").CombinedOutput(); err == nil {
		e.Java = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	envtestMod := filepath.Join(root, "tests", "tools", "envtest", "go.mod")
	e.Kubernetes = "kube-apiserver " + firstMatch(envtestMod, regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`)) + " (built from source by tests/tools/envtest)"
	e.Etcd = firstMatch(envtestMod, regexp.MustCompile(`(?m)^\s*go\.etcd\.io/etcd/server/v3 (v\S+)`))
	pom := filepath.Join(root, "tests", "eureka-server", "pom.xml")
	e.Eureka = fmt.Sprintf("Spring Cloud Netflix Eureka server, Spring Cloud %s, Spring Boot %s",
		firstMatch(pom, regexp.MustCompile(`spring-cloud-dependencies</artifactId>\s*<version>([^<]+)`)),
		firstMatch(pom, regexp.MustCompile(`spring-boot-starter-parent</artifactId>\s*<version>([^<]+)`)))
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		e.Commit = strings.TrimSpace(string(out))
		if out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
			e.Commit += " (with uncommitted changes)"
			e.Dirty = true
		}
	}
	for _, p := range []*string{&e.CPU, &e.Kernel, &e.Java, &e.Etcd, &e.Commit} {
		if *p == "" {
			*p = "unknown"
		}
	}
	return e
}

func firstMatch(path string, re *regexp.Regexp) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if m := re.FindSubmatch(data); m != nil {
		return strings.TrimSpace(string(m[1]))
	}
	return ""
}

// SampleLoad reads the load average and, over one second, the processes
// outside this process's tree that kept a core more than 10 % busy.
func SampleLoad(when string) LoadSample {
	s := LoadSample{When: when}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) > 0 {
			s.LoadAvg1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	before := processTimes()
	time.Sleep(time.Second) // the sampling window itself
	after := processTimes()
	ours := descendants(os.Getpid(), after)
	type busy struct {
		name string
		pct  float64
	}
	var list []busy
	for pid, a := range after {
		b, ok := before[pid]
		if !ok || ours[pid] {
			continue
		}
		pct := float64(a.ticks - b.ticks) // USER_HZ is 100: ticks over one second are percent
		if pct > 10 {
			list = append(list, busy{a.name, pct})
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].pct > list[j].pct })
	for _, b := range list {
		s.Others = append(s.Others, fmt.Sprintf("%s %.0f%%", b.name, b.pct))
	}
	return s
}

type procTime struct {
	name  string
	ppid  int
	ticks int64
}

func processTimes() map[int]procTime {
	out := map[int]procTime{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, ok := readProcTime(pid); ok {
			out[pid] = t
		}
	}
	return out
}

func readProcTime(pid int) (procTime, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procTime{}, false
	}
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return procTime{}, false
	}
	f := strings.Fields(string(data[end+1:]))
	if len(f) < 13 {
		return procTime{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return procTime{name: string(data[open+1 : end]), ppid: ppid, ticks: utime + stime}, true
}

func descendants(root int, procs map[int]procTime) map[int]bool {
	ours := map[int]bool{root: true}
	for changed := true; changed; {
		changed = false
		for pid, p := range procs {
			if !ours[pid] && ours[p.ppid] {
				ours[pid], changed = true, true
			}
		}
	}
	return ours
}

// CPUTime is a process's user+system CPU time.
func CPUTime(pid int) (time.Duration, error) {
	t, ok := readProcTime(pid)
	if !ok {
		return 0, fmt.Errorf("cpu time of pid %d: process gone", pid)
	}
	return time.Duration(t.ticks) * (time.Second / 100), nil
}

// Memory is a process's resident set now and at its peak, from
// /proc/PID/status.
type Memory struct {
	RSSKiB, HWMKiB int64
	// AnonKiB is the anonymous part of RSS (heap, stacks); FileKiB the
	// file-backed part (mostly the binary's own mapped pages).
	AnonKiB, FileKiB int64
}

// ReadMemory reads VmRSS and VmHWM of pid.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, fmt.Errorf("memory of pid %d: %w", pid, err)
	}
	defer f.Close()
	var m Memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			m.RSSKiB = n
		case "VmHWM":
			m.HWMKiB = n
		case "RssAnon":
			m.AnonKiB = n
		case "RssFile":
			m.FileKiB = n
		}
	}
	if m.RSSKiB == 0 {
		return m, fmt.Errorf("memory of pid %d: no VmRSS in /proc/%d/status", pid, pid)
	}
	return m, nil
}

// MiB converts KiB to MiB.
func MiB(kib int64) float64 { return float64(kib) / 1024 }
