package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/signal"
	"syscall"
	"time"
)

// Via is the header value the proxy adds to every answer it forwards, so a
// test can see that an answer passed through it.
const Via = "1.1 mesh-proxy"

// runProxy is `testapp proxy`: the proxy a service mesh puts in front of
// the app (istio-proxy, linkerd-proxy), reduced to what the pod's callers
// notice. It forwards every HTTP request it receives on -listen to the app
// at -to. On SIGTERM it keeps serving for -exit-after-sigterm (istio-proxy's
// default terminationDrainDuration is 5 s), then exits 0, whether or not the
// app still serves: from then on the pod refuses its callers.
func runProxy(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "address the pod's callers reach")
	to := fs.String("to", "127.0.0.1:18080", "the app's address, host:port")
	exitAfter := fs.Duration("exit-after-sigterm", 5*time.Second, "how long to keep serving after SIGTERM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	terminated, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return proxy(terminated, ln, *to, *exitAfter)
}

// proxy serves ln, forwarding to the app at to, until exitAfter after
// terminated ends. While it drains, every connection is closed after its
// answer, as Envoy's graceful drain does, so callers connect again.
func proxy(terminated context.Context, ln net.Listener, to string, exitAfter time.Duration) error {
	app := &url.URL{Scheme: "http", Host: to}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(app)
			r.SetXForwarded()
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Add("Via", Via)
			return nil
		},
	}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-terminated.Done():
	}
	srv.SetKeepAlivesEnabled(false)
	select {
	case err := <-served:
		return err
	case <-time.After(exitAfter):
	}
	if err := srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
