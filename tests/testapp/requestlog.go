package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// requestLog is where every answered request is logged: the container's
// stdout, which the kubelet keeps and a failed test of tests/cluster
// keeps in its artifacts.
var requestLog io.Writer = os.Stdout

// logged writes a line per request once it is answered: when it began (UTC),
// how long the handler took, the status, method, path and caller. It is the
// app's side of a call a caller saw fail or time out: whether the request
// arrived, when, and how long the app took over it. One write per line, so
// concurrent lines do not mix.
func logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		fmt.Fprintf(requestLog, "request began=%s took=%s status=%d %s %s from=%s\n",
			began.UTC().Format(time.RFC3339Nano), time.Since(began).Round(time.Microsecond), sw.status, r.Method, r.URL.Path, r.RemoteAddr)
	})
}

// statusWriter notes the status a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}
