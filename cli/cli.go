package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// Exit codes of Main.
const (
	// ExitOK: the command did what was asked and found nothing wrong.
	ExitOK = 0
	// ExitFailure: a check failed, a document was denied, or the operation
	// failed.
	ExitFailure = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
)

// Streams are the command's standard input, output and error.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what every subcommand shares: its streams and how it is called.
type env struct {
	Streams
	// prog is how the user invoked the binary: "eurekube" or, as a kubectl
	// plugin, "kubectl eurekube".
	prog string
}

// usageError is a wrong command line: it is printed with the usage and
// exits with ExitUsage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errReported ends a command with ExitFailure after it printed why.
var errReported = errors.New("failure reported")

var commands = []command{
	{"inject", "inject the registrar into a manifest stream, as the webhook would", runInject},
	{"status", "every syncer and import, and the writes the gateway refused", runStatus},
	{"check", "check the installation, one line per check", runCheck},
	{"uninstall", "delete every EurekaSyncer and wait until the manager detached each", runUninstall},
	{"version", "print the version", runVersion},
}

// Main runs the command line args, whose first element is the program as
// invoked, and returns the exit code.
func Main(ctx context.Context, args []string, streams Streams) int {
	e := &env{Streams: streams, prog: programName(args)}
	if len(args) < 2 {
		e.usage(e.Err)
		return ExitUsage
	}
	name, rest := args[1], args[2:]
	if name == "help" || name == "-h" || name == "--help" {
		e.usage(e.Out)
		return ExitOK
	}
	for _, c := range commands {
		if c.name == name {
			return e.exit(c.name, c.run(ctx, e, rest))
		}
	}
	fmt.Fprintf(e.Err, "%s: unknown command %q\n\n", e.prog, name)
	e.usage(e.Err)
	return ExitUsage
}

// exit turns a command's error into an exit code, printing it.
func (e *env) exit(name string, err error) int {
	var usage usageError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return ExitOK
	case errors.Is(err, errReported):
		return ExitFailure
	case errors.As(err, &usage):
		fmt.Fprintf(e.Err, "%s %s: %s\nRun '%s %s --help' for usage.\n", e.prog, name, usage.msg, e.prog, name)
		return ExitUsage
	}
	fmt.Fprintf(e.Err, "%s %s: %v\n", e.prog, name, err)
	return ExitFailure
}

// programName is "kubectl eurekube" when the binary runs as the kubectl
// plugin kubectl-eurekube, else the binary's name.
func programName(args []string) string {
	if len(args) == 0 || args[0] == "" {
		return "eurekube"
	}
	base := strings.TrimSuffix(filepath.Base(args[0]), ".exe")
	if plugin, ok := strings.CutPrefix(base, "kubectl-"); ok {
		return "kubectl " + plugin
	}
	return base
}

func (e *env) usage(w io.Writer) {
	fmt.Fprintf(w, "%s manages Eurekube: pods registered in Netflix Eureka.\n\nUsage:\n  %s <command> [flags]\n\nCommands:\n", e.prog, e.prog)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's flags.\nExit codes: 0 ok, 1 a failure found or the operation failed, 2 usage.\n", e.prog)
}

// flagSet is a subcommand's flags; its usage names the command as the user
// invoked it and says what it does.
func (e *env) flagSet(name, args, about string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(e.Err)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(e.Out, "Usage:\n  %s %s %s\n\n%s\n\nFlags:\n%s", e.prog, name, args, strings.TrimSpace(about), fs.FlagUsages())
	}
	return fs
}

// parse parses args into fs; a bad flag or a stray argument is a usage
// error, --help prints the usage and ends the command successfully.
func parse(fs *pflag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard) // errors are printed once, by exit
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err // pflag printed the usage
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	return nil
}
