package main

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Process accounting (acct(2)) writes one record for every process of the
// machine when it ends: its command name, its parent and its CPU. With it
// on for the run, every CPU-second has an owner by name — the compilers
// and linker, each suite's test binary, the JVMs, the API servers, the
// node's daemons, the pods' processes — where getrusage can only say
// "children" and "orphans". It needs root (CAP_SYS_PACCT); without it the
// run says so and reports what getrusage knows.

// acctRecordSize is the size of struct acct_v3 (linux/acct.h).
const acctRecordSize = 64

// acctRecord is what the split needs of one struct acct_v3.
type acctRecord struct {
	pid, ppid uint32
	cpu       time.Duration
	comm      string
}

// startAcct turns process accounting on into path, or says why not.
func startAcct(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_ = f.Close()
	if err := unix.Acct(path); err != nil {
		return fmt.Errorf("acct(2): %w", err)
	}
	return nil
}

// stopAcct turns process accounting off (acct(NULL)).
func stopAcct() {
	_, _, _ = unix.Syscall(unix.SYS_ACCT, 0, 0, 0)
}

// compT decodes a comp_t: a 13-bit mantissa and a 3-bit base-8 exponent,
// in ticks of AHZ (100 per second).
func compT(v uint16) time.Duration {
	ticks := int64(v&0x1fff) << (3 * (v >> 13))
	return time.Duration(ticks) * (time.Second / 100)
}

// readAcct reads the acct_v3 records of r.
func readAcct(r io.Reader) ([]acctRecord, error) {
	var out []acctRecord
	buf := make([]byte, acctRecordSize)
	for {
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return out, nil
			}
			return out, err
		}
		if buf[1]&0x0f != 3 {
			return out, fmt.Errorf("process accounting record of version %d, not 3", buf[1]&0x0f)
		}
		le := binary.LittleEndian
		comm := buf[48:64]
		if i := slices.Index(comm, 0); i >= 0 {
			comm = comm[:i]
		}
		out = append(out, acctRecord{
			pid:  le.Uint32(buf[16:]),
			ppid: le.Uint32(buf[20:]),
			cpu:  compT(le.Uint16(buf[32:])) + compT(le.Uint16(buf[34:])),
			comm: string(comm),
		})
	}
}

// acctOwner is the name under which a command's CPU is added up: test
// binaries by their package, the Go toolchain's parts each by its name
// (compile, link and vet are the ones a change of flags moves), the C
// toolchain's together, each other command by its name.
func acctOwner(comm string) string {
	switch {
	case strings.HasSuffix(comm, ".test"):
		return comm + " (a test binary)"
	case slices.Contains([]string{"go", "compile", "link", "asm", "cgo", "vet", "buildid", "cover", "pack"}, comm):
		return "go toolchain: " + comm
	case slices.Contains([]string{"gcc", "cc1", "as", "ld", "collect2", "cc"}, comm):
		return "the C toolchain (cgo's gcc, for -race)"
	case comm == "java":
		return "java (Eureka servers, Spring clients)"
	}
	return comm
}

// acctSplit adds up the CPU of the processes that descend from root
// (testrun) by owner, the largest first, and their total.
func acctSplit(records []acctRecord, root uint32) (owners []acctShare, total time.Duration) {
	parent := map[uint32]uint32{}
	for _, r := range records {
		parent[r.pid] = r.ppid
	}
	ours := func(pid uint32) bool {
		for seen := 0; pid > 1 && seen < 64; seen++ {
			if pid == root {
				return true
			}
			pid = parent[pid]
		}
		return false
	}
	byOwner := map[string]*acctShare{}
	for _, r := range records {
		if r.pid == root || !ours(r.ppid) {
			continue
		}
		name := acctOwner(r.comm)
		s := byOwner[name]
		if s == nil {
			s = &acctShare{owner: name}
			byOwner[name] = s
		}
		s.cpu += r.cpu
		s.processes++
		total += r.cpu
	}
	for _, s := range byOwner {
		owners = append(owners, *s)
	}
	slices.SortFunc(owners, func(a, b acctShare) int {
		return cmp.Or(cmp.Compare(b.cpu, a.cpu), cmp.Compare(a.owner, b.owner))
	})
	return owners, total
}

// acctShare is one owner's CPU and how many processes it ran.
type acctShare struct {
	owner     string
	cpu       time.Duration
	processes int
}

// reportAcct prints the split of the accounting file at path, the largest
// owners first; those under a second together.
func reportAcct(path string) {
	f, err := os.Open(path)
	if err != nil {
		fmt.Printf("testrun: CPU by command: %v\n", err)
		return
	}
	defer f.Close()
	records, err := readAcct(f)
	if err != nil {
		fmt.Printf("testrun: CPU by command: %s: %v\n", path, err)
	}
	owners, total := acctSplit(records, uint32(os.Getpid()))
	fmt.Printf("testrun: CPU by command (process accounting, %d processes ended below testrun, %ds of CPU; records in %s):\n",
		len(records), int(total.Seconds()), path)
	var small time.Duration
	var smallN int
	for _, s := range owners {
		if s.cpu < time.Second*5 {
			small += s.cpu
			smallN += s.processes
			continue
		}
		fmt.Printf("testrun:   %6ds %5.1f%%  %s (%d processes)\n", int(s.cpu.Seconds()), 100*s.cpu.Seconds()/max(total.Seconds(), 1), s.owner, s.processes)
	}
	fmt.Printf("testrun:   %6ds %5.1f%%  every other command under 5 s (%d processes)\n", int(small.Seconds()), 100*small.Seconds()/max(total.Seconds(), 1), smallN)
}
