package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// On SIGTERM the app answers the request it is serving before it exits: an
// exit while a request is in flight cuts its connection, and the caller
// sees a failed call that no drain could have saved.
func TestServeHTTP_AnswersTheRequestInFlightBeforeItReturns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	arrived, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(arrived)
			<-release
		}
		_, _ = io.WriteString(w, "pod-1\n")
	})
	ctx, terminate := context.WithCancel(context.Background())
	defer terminate()
	returned := make(chan error, 1)
	go func() { returned <- serveHTTP(ctx, addr, h) }()

	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the app never answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	answer := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		answer <- err
	}()
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		t.Fatal("the slow request never reached the handler")
	}
	terminate() // SIGTERM
	// Shutdown has begun once new connections are refused.
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the app still accepts connections a minute after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-returned:
		t.Fatalf("the app returned (%v) while a request was still being answered", err)
	default:
	}
	close(release)
	if err := <-answer; err != nil {
		t.Fatalf("the request in flight at SIGTERM failed: %v", err)
	}
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the app did not return after its last request was answered")
	}
}
