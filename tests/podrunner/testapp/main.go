// Command testapp is the app container the pod runner starts for every
// container that is not the registrar: an HTTP server on $LISTEN_ADDR that
// answers every readiness path with 200 and "/" with its pod name, so a
// caller can see which pod served it. On SIGTERM it stops accepting new
// connections and exits, as a well-behaved app does.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr, pod := os.Getenv("LISTEN_ADDR"), os.Getenv("POD_NAME")
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, pod) })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "testapp:", err)
		os.Exit(1)
	}
}
