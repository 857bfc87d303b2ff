// Command manager is Eurekube's manager: the pod injection webhook, the
// EurekaSyncer reconciler, health probes and metrics in one process. Run it
// with --help for its flags; package app holds the rest.
//
// `manager gateway` runs Eurekube's Eureka gateway instead (package
// gateway): the same image, another Deployment.
//
// Invoked as eurekube (the manager image links /eurekube to it), it is the
// eurekube command line instead: the Helm chart's pre-delete hook runs
// `/eurekube uninstall` from the manager image, so uninstalling needs no
// image of its own and the image no second copy of the same libraries.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/eurekube/eurekube/cli"
	"github.com/eurekube/eurekube/manager"
)

// cliName is the name under which the manager runs the command line.
const cliName = "eurekube"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	if filepath.Base(os.Args[0]) == cliName {
		return cli.Main(ctx, os.Args, cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	}
	if len(os.Args) > 1 && os.Args[1] == manager.GatewayCommand {
		return runGateway(ctx, os.Args[2:])
	}
	cfg, err := manager.ParseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		return 2
	}
	if err := manager.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		return 1
	}
	return 0
}

// runGateway runs `manager gateway`: Eureka's API with identity on every
// write, in front of the Eureka servers (package gateway).
func runGateway(ctx context.Context, args []string) int {
	cfg, err := manager.ParseGatewayFlags(args, os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gateway: %v\n", err)
		return 2
	}
	if err := manager.RunGateway(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "gateway: %v\n", err)
		return 1
	}
	return 0
}
