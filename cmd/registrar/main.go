// Command registrar is Eurekube's sidecar: it registers its pod in Eureka,
// gates UP/DOWN on the app's health, heartbeats, and cancels the
// registration on SIGTERM. Configuration comes from the EUREKUBE_*
// environment the webhook injects (see sidecar/env.go); each variable also
// has a flag (EUREKUBE_HEALTH_PATH → -health-path) that overrides it.
//
// The same binary is the drain helper of app containers (see
// sidecar/drain.go): `registrar install-drain DIR` copies it into a volume,
// and `DIR/eurekube-drain drain -wait=100s [hook]` waits, then runs the
// container's own preStop hook.
//
// Unless GOGC is set, the garbage collector runs at GOGC=25 (see
// defaultGCPercent).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/logging"
	"github.com/eurekube/eurekube/sidecar"
)

// defaultGCPercent is the registrar's GOGC when the environment sets none.
// Its live heap stays under 1 MiB, so at Go's default of 100 (a 4 MiB
// minimum heap goal) the garbage of a health probe every second, a new
// connection each time, piles up for minutes before the first collection,
// and the runtime keeps those pages resident: 5 MiB of anonymous memory
// after 3 minutes. At 25 the goal is 1 MiB, a collection comes about every
// 30 s and costs under a millisecond of CPU, and anonymous memory stays
// near 3.5 MiB: this sidecar runs in every pod, where memory is the scarcer
// resource. A default GOMEMLIMIT would not do: the runtime counts more than
// is resident, and a limit of 2 to 4 MiB made it collect without pause
// (over a thousand collections in 3 minutes, ten times the CPU).
const defaultGCPercent = 25

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.LookupEnv, os.Stderr))
}

// run returns the process exit code: 0 after a clean shutdown, 2 for bad
// configuration.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case sidecar.DrainCommand:
			return drain(ctx, args[1:], stderr)
		case sidecar.InstallDrainCommand:
			if len(args) != 2 {
				fmt.Fprintf(stderr, "registrar: usage: %s DIR\n", sidecar.InstallDrainCommand)
				return 2
			}
			if err := sidecar.InstallDrain(args[1]); err != nil {
				fmt.Fprintf(stderr, "registrar: %v\n", err)
				return 1
			}
			return 0
		}
	}
	lookup, err := parseFlags(args, lookupEnv, stderr)
	if err != nil {
		return 2
	}
	cfg, err := sidecar.ParseEnv(lookup)
	if err != nil {
		fmt.Fprintf(stderr, "registrar: bad configuration: %v\n", err)
		return 2
	}
	log, err := logging.New(os.Stdout, cfg.LogLevel, "registrar")
	if err != nil {
		fmt.Fprintf(stderr, "registrar: bad configuration: %s: %v\n", sidecar.EnvLogLevel, err)
		return 2
	}
	metrics := sidecar.NewMetrics()
	// Credentials and TLS material are read from their files (cfg names
	// them), and read again when they change.
	client, err := sidecar.NewClients(cfg, eureka.Options{
		URLs:     cfg.EurekaURLs,
		Username: cfg.Username,
		Password: cfg.Password,
		Timeout:  cfg.RequestTimeout,
		Logger:   log,
		Observer: metrics,
	}, log)
	if err != nil {
		fmt.Fprintf(stderr, "registrar: bad configuration: %s: %v\n", sidecar.EnvEurekaURLs, err)
		return 2
	}
	reg := sidecar.New(cfg, client, log, metrics)

	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		fmt.Fprintf(stderr, "registrar: %s=%q: cannot listen: %v\n", sidecar.EnvListenAddr, cfg.ListenAddr, err)
		return 2
	}
	srv := &http.Server{Handler: handler(reg, metrics), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("health server stopped")
		}
	}()

	log.WithFields(logrus.Fields{"eureka": eureka.RedactAll(cfg.EurekaURLs), "listen": ln.Addr().String()}).Info("registrar starting")
	_ = reg.Run(ctx)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	log.Info("registrar stopped")
	return 0
}

// drain runs the drain helper in an app container's preStop: 2 for bad
// arguments, 1 when the container's own hook fails (the kubelet reports
// FailedPreStopHook with the output), 0 otherwise.
func drain(ctx context.Context, args []string, stderr io.Writer) int {
	d, err := sidecar.ParseDrain(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "eurekube-drain: %v\n", err)
		return 2
	}
	if err := d.Run(ctx, os.Stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "eurekube-drain: %v\n", err)
		return 1
	}
	return 0
}

// handler serves /healthz (liveness: the process loop is alive, whatever
// Eureka's state) and /metrics.
func handler(reg *sidecar.Registrar, metrics *sidecar.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		status, registered := reg.Status()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "registered": registered})
	})
	mux.Handle("/metrics", metrics)
	return mux
}

// parseFlags defines one flag per environment variable of the contract
// and returns a lookup in which a set flag wins over the environment.
func parseFlags(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (func(string) (string, bool), error) {
	fs := flag.NewFlagSet("registrar", flag.ContinueOnError)
	fs.SetOutput(stderr)
	values := map[string]*string{}
	for _, env := range sidecar.EnvNames() {
		values[env] = fs.String(flagName(env), "", "overrides "+env)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return func(env string) (string, bool) {
		if set[flagName(env)] {
			return *values[env], true
		}
		return lookupEnv(env)
	}, nil
}

// flagName is the flag of an environment variable:
// EUREKUBE_HEALTH_PATH → health-path.
func flagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "EUREKUBE_")), "_", "-")
}
