package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release, set at build time with
// -ldflags '-X github.com/eurekube/eurekube/cli.Version=v0.3.0'; without it
// the version comes from the build information (module version, commit).
var Version = ""

func runVersion(_ context.Context, e *env, args []string) error {
	fs := e.flagSet("version", "", "Print the version of this binary: release, commit and Go version.")
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(e.Out, "eurekube %s\n", version())
	return nil
}

// version is Version, else what the Go toolchain recorded: the module's
// version, the commit and whether the tree was modified.
func version() string {
	v, commit, modified := Version, "", ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit != "" {
		return fmt.Sprintf("%s (commit %s%s, %s)", v, commit, modified, runtime.Version())
	}
	return fmt.Sprintf("%s (%s)", v, runtime.Version())
}
