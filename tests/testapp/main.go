// Command testapp is the app the end-to-end suites run in every app
// container: an HTTP server on $LISTEN_ADDR (default :8080) that answers
// every readiness path with 200 and "/" with its pod name ($POD_NAME), so a
// caller can see which pod served it. On SIGTERM it stops accepting new
// connections and exits, as a well-behaved app does.
//
// `testapp hook URL` is a preStop command for images without a shell: it
// sends GET URL with the pod's name in the X-Pod header and fails unless the
// answer is 2xx, so a test can see that, and when, a pod's own hook ran.
package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	pod := os.Getenv("POD_NAME")
	if len(os.Args) == 3 && os.Args[1] == "hook" {
		if err := hook(os.Args[2], pod); err != nil {
			fmt.Fprintln(os.Stderr, "testapp hook:", err)
			os.Exit(1)
		}
		return
	}
	addr := cmp.Or(os.Getenv("LISTEN_ADDR"), ":8080")
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

func hook(url, pod string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Pod", pod)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
