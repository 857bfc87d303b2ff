package harness_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eurekube/eurekube/tests/harness"
)

// A start-up wait that times out says what the URL last answered (a
// /readyz?verbose body names the check that failed), so a failed suite
// start explains itself.
func TestWaitHTTP200_ATimeoutSaysWhatTheURLLastAnswered(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "[+]ping ok\n[-]informers failed: reason withheld\nhealthz check failed", http.StatusInternalServerError)
	}))
	defer srv.Close()
	p, err := harness.StartProcess("sleeper", "sleep", []string{"60"}, nil, filepath.Join(t.TempDir(), "sleeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	err = p.WaitHTTP200(context.Background(), nil, srv.URL+"/readyz?verbose", 300*time.Millisecond)
	if err == nil {
		t.Fatal("WaitHTTP200 on a URL that answers 500: no error")
	}
	for _, want := range []string{"did not answer 200", "500 Internal Server Error", "[-]informers failed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
