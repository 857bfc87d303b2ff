package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/tests/sandbox"
)

var sb *sandbox.Sandbox

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "eurekube-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err = sandbox.Start(ctx, sandbox.Options{Dir: dir, ResyncPeriod: 2 * time.Second, Logger: log})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: start the sandbox: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := sb.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stop the sandbox: %v\n", err)
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", sb.LogDir)
	} else {
		_ = os.RemoveAll(dir)
	}
	return code
}
