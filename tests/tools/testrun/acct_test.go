package main

import (
	"bytes"
	"encoding/binary"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/eurekube/eurekube/tests/harness"
)

func TestCompT(t *testing.T) {
	for _, c := range []struct {
		v    uint16
		want time.Duration
	}{
		{0, 0},
		{100, time.Second},
		{0x1fff, 81910 * time.Millisecond},
		{1<<13 | 1000, 80 * time.Second}, // 1000 << 3 ticks
	} {
		if got := compT(c.v); got != c.want {
			t.Errorf("compT(%#x) = %v, want %v", c.v, got, c.want)
		}
	}
}

func record(pid, ppid uint32, ticks uint16, comm string) []byte {
	b := make([]byte, acctRecordSize)
	b[1] = 3
	binary.LittleEndian.PutUint32(b[16:], pid)
	binary.LittleEndian.PutUint32(b[20:], ppid)
	binary.LittleEndian.PutUint16(b[32:], ticks)
	binary.LittleEndian.PutUint16(b[34:], ticks)
	copy(b[48:], comm)
	return b
}

// The split counts only what descends from testrun, a reparented orphan
// included, and adds the C toolchain's parts up under one owner.
func TestAcctSplit(t *testing.T) {
	var file bytes.Buffer
	for _, r := range [][]byte{
		record(20, 10, 100, "gcc"),      // go (10) ← testrun (1000)
		record(21, 10, 300, "cc1"),      //
		record(30, 1000, 200, "java"),   // an orphan reparented to testrun
		record(40, 1, 900, "unrelated"), // not ours
		record(10, 1000, 50, "as"),
		record(1000, 1, 5, "testrun"),
	} {
		file.Write(r)
	}
	records, err := readAcct(&file)
	if err != nil || len(records) != 6 {
		t.Fatalf("readAcct: %d records, %v", len(records), err)
	}
	owners, total := acctSplit(records, 1000)
	if want := 2 * (100 + 300 + 200 + 50) * 10 * time.Millisecond; total != want {
		t.Errorf("total %v, want %v", total, want)
	}
	if len(owners) != 2 || owners[0].owner != acctOwner("gcc") || owners[0].processes != 3 || owners[1].owner != acctOwner("java") {
		t.Errorf("owners %+v", owners)
	}
}

// A test that only computes is found by its first line, and no other.
func TestOnlyComputesFunc(t *testing.T) {
	src := "func TestA(t *testing.T) {\n\tharness.OnlyComputes(t)\n}\n" +
		"func TestB(t *testing.T) {\n\tt.Parallel()\n\tharness.OnlyComputes(t)\n}\n" +
		"func TestC(t *testing.T) {\n\tharness.OnlyComputes(t)\n"
	var got []string
	for _, m := range onlyComputesFunc.FindAllStringSubmatch(src, -1) {
		got = append(got, m[1])
	}
	if len(got) != 2 || got[0] != "TestA" || got[1] != "TestC" {
		t.Errorf("found %v, want [TestA TestC]", got)
	}
}

// testrun names the harness's variable without importing the harness.
func TestOnlyComputesEnvIsTheHarnesss(t *testing.T) {
	if onlyComputesEnv != harness.OnlyComputesEnv {
		t.Errorf("testrun sets %s, the harness reads %s", onlyComputesEnv, harness.OnlyComputesEnv)
	}
}

func TestArtifactsRootIsTheHarnesss(t *testing.T) {
	if artifactsRoot != harness.ArtifactsRoot {
		t.Errorf("testrun lists %s, the harness writes %s", artifactsRoot, harness.ArtifactsRoot)
	}
}

// Run from the module's root as make test runs it, the scan finds the
// tests that only compute in their packages, and every fuzz target.
func TestFindTestFuncs_FindsTheMarkedTestsAndTheFuzzTargets(t *testing.T) {
	t.Chdir("../../..")
	pkgs, names, err := onlyComputes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pkgs, "github.com/eurekube/eurekube/controller") || !slices.Contains(names, "TestImportPlan_OneInstancesChangeWritesOneSliceAtMost") {
		t.Errorf("only-computes: packages %v, tests %v", pkgs, names)
	}
	fuzzes, err := findTestFuncs(t.Context(), fuzzFunc, func(*exec.Cmd) time.Duration { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(fuzzes, func(f testFuncs) bool { return f.pkg == "github.com/eurekube/eurekube/gateway" })
	if i < 0 || !slices.Contains(fuzzes[i].names, "FuzzRequest") {
		t.Errorf("fuzz targets: %+v", fuzzes)
	}
}
