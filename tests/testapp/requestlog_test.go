package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"
)

// Each answered request leaves one line: when it began, how long it took,
// its status, method, path and caller.
func TestLogged_OneLinePerRequestWithItsStartDurationAndStatus(t *testing.T) {
	var out bytes.Buffer
	was := requestLog
	requestLog = &out
	t.Cleanup(func() { requestLog = was })
	h := logged(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		time.Sleep(20 * time.Millisecond)
		_, _ = w.Write([]byte("pod-1\n"))
	}))
	for _, path := range []string{"/", "/missing"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	want := regexp.MustCompile(`^request began=20\d\d-\d\d-\d\dT[0-9:.]+Z took=(\d+\.)?\d+m?s status=200 GET / from=192\.0\.2\.1:1234
request began=\S+ took=\S+ status=404 GET /missing from=192\.0\.2\.1:1234
$`)
	if !want.Match(out.Bytes()) {
		t.Fatalf("logged:\n%s", out.String())
	}
}
