package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Listing is what a node could leave behind on the host, section by
// section (processes, mounts, interfaces, routes, rules, cgroups, sysctls,
// paths). Two listings taken before a node starts and after it is torn
// down must be equal.
type Listing map[string][]string

// nodeCommands are the programs only a node runs on this machine (the
// control-plane binaries are left out: other suites run envtest's; the
// containers are found by their cgroup).
var nodeCommands = map[string]bool{
	"containerd": true, "containerd-shim": true, "containerd-shim-runc-v2": true, "runc": true,
	"kubelet": true, "kube-proxy": true, "kube-scheduler": true, "coredns": true,
}

// Sections are the parts of a Listing.
var Sections = []string{"processes", "mounts", "interfaces", "routes", "rules", "cgroups", "sysctls", "paths"}

// counters are iptables-save's packet and byte counters.
var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// ListHost takes the listing of the machine as it is now.
func ListHost(opts Options) Listing {
	opts.defaults()
	n := &Node{opts: opts}
	l := Listing{}
	for _, section := range Sections {
		l[section] = nil
	}
	for _, p := range processes() {
		if nodeCommands[p.comm] || strings.Contains(p.cmdline, opts.DataDir) || strings.Contains(p.cmdline, opts.RunDir) {
			l["processes"] = append(l["processes"], fmt.Sprintf("%d %s", p.pid, p.comm))
		}
	}
	for _, pid := range kubepodsPids() {
		l["processes"] = append(l["processes"], fmt.Sprintf("%d (in a kubepods cgroup)", pid))
	}
	for _, mp := range mountPoints() {
		if n.ownMount(mp) || strings.Contains(mp, "kubelet") || strings.Contains(mp, "containerd") || strings.Contains(mp, "netns") {
			l["mounts"] = append(l["mounts"], mp)
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, e := range links {
		l["interfaces"] = append(l["interfaces"], e.Name())
	}
	l["routes"] = commandLines("ip", "-4", "route", "show", "table", "main")
	for _, save := range []string{"iptables-save", "ip6tables-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		if _, err := exec.LookPath(save); err != nil {
			continue
		}
		l["rules"] = append(l["rules"], ruleLines(save, commandLines(save))...)
	}
	l["cgroups"] = kubepodsDirs()
	for _, key := range touchedSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", key)); err == nil {
			l["sysctls"] = append(l["sysctls"], key+"="+strings.TrimSpace(string(v)))
		}
	}
	for _, p := range append(append([]string{}, foreignPaths...), opts.DataDir, opts.RunDir) {
		if _, err := os.Lstat(p); err == nil {
			l["paths"] = append(l["paths"], p)
		}
	}
	for k := range l {
		sort.Strings(l[k])
	}
	return l
}

func commandLines(name string, args ...string) []string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// String renders the listing section by section.
func (l Listing) String() string {
	var keys []string
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s (%d):\n", k, len(l[k]))
		for _, line := range l[k] {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	return b.String()
}

// Diff lists what after has that l has not (+) and the reverse (-).
func (l Listing) Diff(after Listing) []string {
	var diff []string
	sections := map[string]bool{}
	for k := range l {
		sections[k] = true
	}
	for k := range after {
		sections[k] = true
	}
	var keys []string
	for k := range sections {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		before, now := set(l[k]), set(after[k])
		for _, line := range after[k] {
			if !before[line] {
				diff = append(diff, "+ "+k+": "+line)
			}
		}
		for _, line := range l[k] {
			if !now[line] {
				diff = append(diff, "- "+k+": "+line)
			}
		}
	}
	return diff
}

func set(lines []string) map[string]bool {
	m := make(map[string]bool, len(lines))
	for _, line := range lines {
		m[line] = true
	}
	return m
}
