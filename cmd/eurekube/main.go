// Command eurekube is Eurekube's command line, also installed as the
// kubectl plugin kubectl-eurekube: inject, status, check, uninstall. The
// commands are in package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/eurekube/eurekube/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args, cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
