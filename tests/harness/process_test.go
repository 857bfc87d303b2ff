package harness_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
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

// A process that never gets ready leaves where it was stuck: a Go program
// (this test binary, blocked in hangForever) writes every goroutine's stack
// to its log before it is killed.
func TestWaitHTTP200_AHungProcessLeavesItsStacks(t *testing.T) {
	if os.Getenv("HARNESS_HANG") == "1" {
		hangForever()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	log := filepath.Join(t.TempDir(), "hung.log")
	p, err := harness.StartProcess("hung", os.Args[0], []string{"-test.run=^TestWaitHTTP200_AHungProcessLeavesItsStacks$"}, []string{"HARNESS_HANG=1"}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	// Until it logs, it may not yet be the Go runtime that gets the signal.
	harness.Eventually(t, 30*time.Second, "the helper process logs", func() error {
		if !strings.Contains(p.Log(), "hanging") {
			return errors.New("the helper process has not started")
		}
		return nil
	})
	if err := p.WaitHTTP200(context.Background(), nil, srv.URL, 300*time.Millisecond); err == nil {
		t.Fatal("WaitHTTP200 on a URL that answers 503: no error")
	} else if !strings.Contains(err.Error(), "stacks") {
		t.Errorf("error %q does not point to the stacks", err)
	}
	for _, want := range []string{"SIGQUIT", "goroutine ", "hangForever"} {
		if !strings.Contains(p.Log(), want) {
			t.Errorf("the hung process's log does not have %q:\n%s", want, p.LogTail())
		}
	}
}

func hangForever() {
	os.Stderr.WriteString("hanging\n")
	for {
		time.Sleep(time.Hour)
	}
}
