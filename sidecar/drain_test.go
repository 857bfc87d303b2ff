package sidecar

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDrain_ArgsParseBackToTheSameDrain(t *testing.T) {
	for _, d := range []Drain{
		{Wait: 100 * time.Second},
		{Wait: 0},
		{Wait: 90 * time.Second, Command: []string{"/bin/drain", "--wait=20", "-x", "--"}},
		{Wait: time.Second, HTTPGet: &DrainHTTPGet{Scheme: "HTTPS", Host: "localhost", Port: 8443, Path: "/pause?now=1",
			Headers: []DrainHeader{{Name: "Authorization", Value: "Bearer a:b"}, {Name: "X-Empty", Value: ""}}}},
	} {
		got, err := ParseDrain(d.Args(), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", d.Args(), err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("%q parsed to %+v, want %+v", d.Args(), got, d)
		}
	}
}

func TestParseDrain_RejectsBadArgumentsNamingThem(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-wait=-1s"}, "-wait"},
		{[]string{"-wait=soon"}, "wait"},
		{[]string{"-http-port=70000"}, "-http-port=70000"},
		{[]string{"-http-port=80", "-http-scheme=FTP"}, "-http-scheme=FTP"},
		{[]string{"-http-port=80", "-http-header=NoColon"}, "Name:Value"},
		{[]string{"-http-port=80", "--", "/bin/true"}, "one or the other"},
	} {
		var stderr bytes.Buffer
		_, err := ParseDrain(tc.args, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tc.want) {
			t.Errorf("%q: err = %v (%s), want one naming %q", tc.args, err, stderr.String(), tc.want)
		}
	}
}

// The container's own hook runs only after the drain: the app keeps
// serving for the whole wait, then its hook runs as the kubelet would have
// run it.
func TestDrain_RunsTheOwnHttpGetAfterTheWait(t *testing.T) {
	const wait = 300 * time.Millisecond
	var calledAt time.Time
	var header string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calledAt, header = time.Now(), r.Header.Get("X-Drain")
		if r.URL.Path != "/pause" || r.URL.RawQuery != "now=1" {
			http.Error(w, "wrong path "+r.URL.String(), http.StatusNotFound)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	d := Drain{Wait: wait, HTTPGet: &DrainHTTPGet{Scheme: "HTTP", Host: u.Hostname(), Port: int32(port), Path: "/pause?now=1",
		Headers: []DrainHeader{{Name: "X-Drain", Value: "yes"}}}}
	began := time.Now()
	if err := d.Run(context.Background(), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if calledAt.Sub(began) < wait {
		t.Fatalf("the hook ran %s after the start, before the %s drain ended", calledAt.Sub(began), wait)
	}
	if header != "yes" {
		t.Fatalf("header X-Drain = %q", header)
	}
}

func TestDrain_FailsWhenTheOwnHookFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	err := Drain{HTTPGet: &DrainHTTPGet{Scheme: "HTTP", Host: u.Hostname(), Port: int32(port), Path: "/"}}.Run(context.Background(), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("err = %v, want the hook's 500", err)
	}
	err = Drain{Command: []string{"/bin/false"}}.Run(context.Background(), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "/bin/false") {
		t.Fatalf("err = %v, want one naming the command", err)
	}
}

func TestDrain_RunsTheOwnCommandWithItsArguments(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ran")
	var stdout bytes.Buffer
	d := Drain{Wait: 10 * time.Millisecond, Command: []string{"/bin/sh", "-c", `echo "$0" > ` + out + `; echo done`, "hook"}}
	if err := d.Run(context.Background(), &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil || strings.TrimSpace(string(got)) != "hook" || strings.TrimSpace(stdout.String()) != "done" {
		t.Fatalf("command wrote %q (%v), stdout %q", got, err, stdout.String())
	}
}

func TestInstallDrain_CopiesTheRunningBinaryExecutableByAnyone(t *testing.T) {
	dir := t.TempDir()
	if err := InstallDrain(dir); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	want, _ := os.ReadFile(self)
	got, err := os.ReadFile(filepath.Join(dir, DrainBinary))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("installed helper differs from the running binary (%v)", err)
	}
	info, _ := os.Stat(filepath.Join(dir, DrainBinary))
	if info.Mode().Perm() != 0o555 {
		t.Fatalf("mode = %v, want r-xr-xr-x", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left %d files, want only the helper", len(entries))
	}
}
