package cli

import (
	"strings"
	"testing"
)

func TestMain_AsAKubectlPluginUsageReadsKubectlEurekube(t *testing.T) {
	for argv0, want := range map[string]string{
		"/usr/local/bin/kubectl-eurekube": "kubectl eurekube",
		"kubectl-eurekube.exe":            "kubectl eurekube",
		"/eurekube":                       "eurekube",
		"":                                "eurekube",
	} {
		if got := programName([]string{argv0}); got != want {
			t.Errorf("programName(%q) = %q, want %q", argv0, got, want)
		}
	}
	var out strings.Builder
	code := Main(t.Context(), []string{"/krew/bin/kubectl-eurekube", "inject", "--help"}, Streams{Out: &out, Err: &out})
	if code != ExitOK || !strings.Contains(out.String(), "kubectl eurekube inject -f FILE") {
		t.Errorf("kubectl-eurekube inject --help: exit %d\n%s", code, out.String())
	}
}

func TestMain_UsageErrorsExitWith2(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"inject"},
		{"inject", "-f", "x.yaml", "--no-such-flag"},
		{"status", "-o", "table"},
		{"version", "extra"},
	} {
		code, _, stderr := run(t, "", args...)
		if code != ExitUsage {
			t.Errorf("eurekube %s: exit %d, want %d\n%s", strings.Join(args, " "), code, ExitUsage, stderr)
		}
	}
}

func TestVersion_PrintsTheVersion(t *testing.T) {
	code, out, _ := run(t, "", "version")
	if code != ExitOK || !strings.HasPrefix(out, "eurekube ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
}
