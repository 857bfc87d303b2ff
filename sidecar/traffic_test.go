package sidecar

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

func TestTrafficOverride_StandbyIsOutOfServiceAnythingUnexpectedFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		content string
		want    eureka.Status
		err     bool
	}{
		{string(v1alpha1.TrafficStandby), eureka.StatusOutOfService, false},
		{string(v1alpha1.TrafficServe), "", false},
		{"", "", false},
		{v1alpha1.TrafficDetached, eureka.StatusOutOfService, false}, // never registers, but fails closed
		{"Standby\n", eureka.StatusOutOfService, false},
		{" Serve\n", "", false},
		{"\n", "", false},
		{"standby", eureka.StatusOutOfService, true},
		{"serve", eureka.StatusOutOfService, true},
		{"Drain", eureka.StatusOutOfService, true},
		{"Serve\nStandby", eureka.StatusOutOfService, true},
	} {
		got, err := trafficOverride(tc.content)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("trafficOverride(%q) = %q, %v; want %q, error %v", tc.content, got, err, tc.want, tc.err)
		}
	}
}

// trafficRegistrar is a registrar reading file, with its log lines kept.
func trafficRegistrar(file string) (*Registrar, *test.Hook) {
	log, hook := test.NewNullLogger()
	return &Registrar{cfg: Config{TrafficFile: file}, log: log}, hook
}

func writeTraffic(t *testing.T, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "traffic")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestReadTrafficOverride_ReadsTheFileBeforeEachRegistration(t *testing.T) {
	file := writeTraffic(t, "Standby")
	r, hook := trafficRegistrar(file)
	if got := r.readTrafficOverride(); got != eureka.StatusOutOfService {
		t.Fatalf("Standby: %q, want OUT_OF_SERVICE", got)
	}
	if err := os.WriteFile(file, []byte("Serve"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := r.readTrafficOverride(); got != "" {
		t.Fatalf("Serve after Standby: %q, want none", got)
	}
	if len(hook.AllEntries()) != 0 {
		t.Fatalf("logged %v for expected content", hook.AllEntries())
	}
}

func TestReadTrafficOverride_NoSettingNoFile(t *testing.T) {
	r, hook := trafficRegistrar("")
	if got := r.readTrafficOverride(); got != "" || len(hook.AllEntries()) != 0 {
		t.Fatalf("no traffic file set: %q, logged %d lines; want none, silently", got, len(hook.AllEntries()))
	}
}

// A pod injected before the traffic file existed has none: it registers
// as it always did, and says so once.
func TestReadTrafficOverride_AMissingFileIsNoOverrideLoggedOnce(t *testing.T) {
	r, hook := trafficRegistrar(filepath.Join(t.TempDir(), "traffic"))
	for range 3 {
		if got := r.readTrafficOverride(); got != "" {
			t.Fatalf("missing file: %q, want none", got)
		}
	}
	if entries := hook.AllEntries(); len(entries) != 1 || entries[0].Level != logrus.InfoLevel {
		t.Fatalf("logged %v, want one info line", entries)
	}
}

func TestReadTrafficOverride_UnreadableOrUnexpectedFailsClosedWithAWarning(t *testing.T) {
	for name, file := range map[string]string{
		"unexpected content": writeTraffic(t, "Maybe"),
		"unreadable":         t.TempDir(), // a directory: the read fails
	} {
		r, hook := trafficRegistrar(file)
		if got := r.readTrafficOverride(); got != eureka.StatusOutOfService {
			t.Errorf("%s: %q, want OUT_OF_SERVICE", name, got)
		}
		if entries := hook.AllEntries(); len(entries) != 1 || entries[0].Level != logrus.WarnLevel {
			t.Errorf("%s: logged %v, want one warning", name, entries)
		}
	}
}
