package node

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the node changes on the host, and how Teardown undoes it. A node's
// state file records the values to restore, so that a start after a crash
// (or an interrupted test whose children died with it) restores the host
// first.

// touchedSysctls are the kernel settings the kubelet, the bridge plugin and
// kube-proxy may change (paths under /proc/sys). The kubelet sets the vm and
// kernel ones at start; the bridge plugin turns forwarding on.
var touchedSysctls = []string{
	"net/ipv4/ip_forward", // first: writing it resets every interface's forwarding
	"net/ipv4/conf/all/forwarding",
	"net/ipv4/conf/default/forwarding",
	"net/ipv6/conf/all/forwarding",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// foreignPaths are paths outside the node's directories that containerd,
// the CNI plugins, iptables or the kubelet create when they are missing.
// Those the node created are removed at teardown.
var foreignPaths = []string{
	"/var/lib/cni",     // libcni's result cache
	"/run/netns",       // network namespaces of pod sandboxes
	"/var/log/pods",    // only if podLogsDir were ignored
	"/var/lib/kubelet", // the device-plugin socket's directory, fixed in the kubelet
	"/var/lib/containerd",
	"/run/containerd", // containerd 1.6 puts its shims' sockets in /run/containerd/s
	"/opt/containerd",
	"/etc/cni",
	"/usr/libexec/kubernetes",
	"/run/xtables.lock",
}

// ownedChainPrefixes name the iptables chains of the kubelet, kube-proxy and
// the CNI plugins.
var ownedChainPrefixes = []string{"KUBE-", "CNI-"}

// hostState is saved as <DataDir>/host-state.json while a node runs.
type hostState struct {
	// Sysctls holds the values before the node started.
	Sysctls map[string]string `json:"sysctls"`
	// Created are the foreignPaths that did not exist before.
	Created []string `json:"created"`
}

func recordHost() hostState {
	s := hostState{Sysctls: map[string]string{}}
	for _, key := range touchedSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", key)); err == nil {
			s.Sysctls[key] = strings.TrimSpace(string(v))
		}
	}
	for _, p := range foreignPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			s.Created = append(s.Created, p)
		}
	}
	return s
}

func (n *Node) statePath() string { return n.path("host-state.json") }

func (n *Node) saveState(s hostState) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(n.opts.DataDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(n.statePath(), data, 0o600)
}

// loadState reads a state file a previous node left, if any.
func (n *Node) loadState() (*hostState, error) {
	data, err := os.ReadFile(n.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s hostState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("node state %s: %w", n.statePath(), err)
	}
	return &s, nil
}

// setUpNetwork puts NodeIP on a port-less bridge (a dummy interface: these
// kernels lack the dummy driver) and routes the Service and load-balancer
// ranges (and the pod range until cni0 exists) to it: a packet for an address in them that no
// rule rewrites goes nowhere instead of following the default route off
// the machine.
func setUpNetwork() error {
	if err := checkRoutedRanges(registryHosts, net.DefaultResolver.LookupNetIP); err != nil {
		return err
	}
	steps := [][]string{
		{"link", "add", DummyName, "type", "bridge"},
		{"addr", "add", NodeIP + "/32", "dev", DummyName},
		{"link", "set", DummyName, "up"},
	}
	for _, r := range dummyRoutes {
		steps = append(steps, append([]string{"route", "add", r.cidr, "dev", DummyName}, r.extra...))
	}
	for _, args := range steps {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// restoreHost undoes everything a node (running or crashed) did to the
// host, in an order where each step can succeed: processes first (they
// hold mounts and namespaces), then mounts, interfaces, rules, cgroups,
// settings and files. It is idempotent.
func (n *Node) restoreHost(s hostState) error {
	var errs []error
	if err := n.killLeftovers(); err != nil {
		errs = append(errs, err)
	}
	if err := n.unmountAll(); err != nil {
		errs = append(errs, err)
	}
	for _, link := range []string{BridgeName, DummyName} {
		if _, err := os.Stat("/sys/class/net/" + link); err == nil {
			if out, err := exec.Command("ip", "link", "del", link).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", link, err, bytes.TrimSpace(out)))
			}
		}
	}
	for _, tool := range [][2]string{
		{"iptables-save", "iptables-restore"}, {"ip6tables-save", "ip6tables-restore"},
		{"iptables-legacy-save", "iptables-legacy-restore"}, {"ip6tables-legacy-save", "ip6tables-legacy-restore"},
	} {
		if err := removeOwnedChains(tool[0], tool[1]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeKubepodsCgroups(); err != nil {
		errs = append(errs, err)
	}
	for _, key := range touchedSysctls { // in order: ip_forward first
		v, ok := s.Sysctls[key]
		if !ok {
			continue
		}
		p := filepath.Join("/proc/sys", key)
		if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", key, v, err))
			}
		}
	}
	for _, p := range s.Created {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, dir := range []string{n.opts.RunDir, n.opts.DataDir} {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// killLeftovers ends every process of the node that its own stop did not:
// the containers (in the kubelet's cgroups), containerd's shims (detached
// from containerd, so no parent-death signal reaches them), and anything
// still running from the node's directories.
func (n *Node) killLeftovers() error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := n.leftoverPids()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still running after SIGKILL: %v", pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *Node) leftoverPids() []int {
	seen := map[int]bool{}
	for _, pid := range kubepodsPids() {
		seen[pid] = true
	}
	for _, p := range processes() {
		if strings.Contains(p.cmdline, n.opts.DataDir) || strings.Contains(p.cmdline, n.opts.RunDir) {
			seen[p.pid] = true
		}
	}
	delete(seen, os.Getpid())
	var pids []int
	for pid := range seen {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}

type process struct {
	pid           int
	comm, cmdline string
}

// processes lists every live process of the machine: zombies (killed,
// not yet reaped by their parent, often PID 1) hold nothing and are left
// out.
func processes() []process {
	entries, _ := os.ReadDir("/proc")
	var out []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if zombie(e.Name()) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		out = append(out, process{pid: pid, comm: strings.TrimSpace(string(comm)), cmdline: string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))})
	}
	return out
}

// zombie reports whether /proc/<pid>/stat says the process has exited.
func zombie(pid string) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return true // gone
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X'
}

// kubepodsDirs are the kubelet's cgroup trees, one per v1 hierarchy.
func kubepodsDirs() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods*")
	one, _ := filepath.Glob("/sys/fs/cgroup/kubepods*") // a v2 (unified) mount
	return append(dirs, one...)
}

// kubepodsPids are the processes in the kubelet's cgroups: the containers.
func kubepodsPids() []int {
	seen := map[int]bool{}
	var pids []int
	for _, root := range kubepodsDirs() {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] && !zombie(f) {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeKubepodsCgroups removes the kubelet's (by then empty) cgroup trees,
// deepest first.
func removeKubepodsCgroups() error {
	var errs []error
	for _, root := range kubepodsDirs() {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountPoints lists the machine's mount points, in mount order.
func mountPoints() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownMount reports whether a mount point belongs to the node: under its
// directories, or a pod sandbox's network namespace.
func (n *Node) ownMount(mp string) bool {
	for _, dir := range []string{n.opts.DataDir, n.opts.RunDir} {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			return true
		}
	}
	return strings.HasPrefix(mp, "/run/netns/cni-") || strings.HasPrefix(mp, "/var/run/netns/cni-")
}

// unmountAll unmounts the node's mounts, the last mounted first; a busy
// one is detached.
func (n *Node) unmountAll() error {
	var errs []error
	for attempt := 0; attempt < 3; attempt++ {
		mps := mountPoints()
		errs = nil
		found := false
		for i := len(mps) - 1; i >= 0; i-- {
			if !n.ownMount(mps[i]) {
				continue
			}
			found = true
			if err := syscall.Unmount(mps[i], 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				if err := syscall.Unmount(mps[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
					errs = append(errs, fmt.Errorf("unmount %s: %w", mps[i], err))
				}
			}
		}
		if !found {
			return nil
		}
	}
	return errors.Join(errs...)
}

// removeOwnedChains deletes, in one iptables-restore transaction per
// table, the rules of built-in (and other foreign) chains that jump to the
// node's chains, then the node's chains themselves. It leaves every other
// rule as it was. A missing tool is nothing to clean.
func removeOwnedChains(save, restore string) error {
	if _, err := exec.LookPath(save); err != nil {
		return nil
	}
	out, err := exec.Command(save).Output()
	if err != nil {
		return fmt.Errorf("%s: %w", save, err)
	}
	script := ownedChainsScript(string(out))
	if script == "" {
		return nil
	}
	cmd := exec.Command(restore, "--noflush")
	cmd.Stdin = strings.NewReader(script)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s\n%s", restore, err, bytes.TrimSpace(msg), script)
	}
	return nil
}

func owned(chain string) bool {
	for _, p := range ownedChainPrefixes {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

// ownedChainsScript turns iptables-save output into the iptables-restore
// input that removes the node's chains and every jump to them.
func ownedChainsScript(saved string) string {
	var script strings.Builder
	var table string
	var deletes, chains []string
	flush := func() {
		if table == "" || (len(deletes) == 0 && len(chains) == 0) {
			return
		}
		script.WriteString("*" + table + "\n")
		for _, d := range deletes {
			script.WriteString(d + "\n")
		}
		for _, c := range chains {
			script.WriteString("-F " + c + "\n")
		}
		for _, c := range chains {
			script.WriteString("-X " + c + "\n")
		}
		script.WriteString("COMMIT\n")
	}
	for _, line := range strings.Split(saved, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table, deletes, chains = strings.TrimPrefix(line, "*"), nil, nil
		case strings.HasPrefix(line, ":"):
			if chain := strings.Fields(line[1:]); len(chain) > 0 && owned(chain[0]) {
				chains = append(chains, chain[0])
			}
		case strings.HasPrefix(line, "-A "):
			fields := strings.Fields(line)
			if len(fields) < 2 || owned(fields[1]) {
				continue // flushed with its chain
			}
			for i := 2; i+1 < len(fields); i++ {
				if (fields[i] == "-j" || fields[i] == "-g") && owned(fields[i+1]) {
					deletes = append(deletes, "-D "+strings.TrimPrefix(line, "-A "))
					break
				}
			}
		case line == "COMMIT":
			flush()
			table = ""
		}
	}
	return script.String()
}

// ruleLines are the listing's lines of one iptables-save output (save is
// the tool, lines its output): no comments (dates and versions), counters
// blanked, and without what a table's first use creates (see
// withoutPristineChains).
func ruleLines(save string, lines []string) []string {
	var out []string
	for _, line := range withoutPristineChains(lines) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, save+": "+counters.ReplaceAllString(line, "[-]"))
	}
	return out
}

// withoutPristineChains drops from iptables-save output the built-in
// chains that hold no rule and keep their default policy (ACCEPT), and a
// table left with no chain or rule at all. The first use of iptables on a
// machine (the node's kube-proxy, or anything else) creates its tables
// with every built-in chain empty and accepting, and the kernel keeps them
// after the node's teardown has removed its own chains and rules: nothing
// is left there. A rule, a chain of any other name (empty or not) or a
// changed policy is kept, so a leftover still shows.
func withoutPristineChains(lines []string) []string {
	var out, table []string
	inTable := false
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "*"):
			out = append(out, table...) // an unterminated table, kept as it was
			table, inTable = []string{line}, true
		case inTable && line == "COMMIT":
			out = append(out, withoutPristineTable(append(table, line))...)
			table, inTable = nil, false
		case inTable:
			table = append(table, line)
		default:
			out = append(out, line)
		}
	}
	return append(out, table...)
}

// withoutPristineTable is one table's lines, from "*name" to "COMMIT",
// without its pristine built-in chains, or nothing if nothing else is in
// it.
func withoutPristineTable(table []string) []string {
	ruled := map[string]bool{}
	for _, line := range table {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "-A" {
			ruled[f[1]] = true
		}
	}
	var out []string
	left := false
	for _, line := range table {
		if strings.HasPrefix(line, ":") {
			// ":NAME POLICY [packets:bytes]"; a chain that is not
			// built in has the policy "-".
			f := strings.Fields(line[1:])
			if len(f) >= 2 && f[1] == "ACCEPT" && !ruled[f[0]] {
				continue
			}
		}
		if !strings.HasPrefix(line, "*") && line != "COMMIT" && !strings.HasPrefix(line, "#") {
			left = true
		}
		out = append(out, line)
	}
	if !left {
		return nil
	}
	return out
}
