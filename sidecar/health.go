package sidecar

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Checker probes the app once.
type Checker interface {
	Check(ctx context.Context) error
}

// NewChecker returns the probe that h describes, against host.
func NewChecker(h HealthConfig, host string) Checker {
	addr := net.JoinHostPort(host, strconv.Itoa(h.Port))
	if h.Type == HealthHTTP {
		return &httpChecker{
			url: h.Scheme + "://" + addr + h.Path,
			client: &http.Client{
				Timeout: h.Timeout,
				// Like the kubelet: an app's self-signed certificate is
				// not a health failure.
				Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
				// Redirects are followed as the kubelet does.
			},
		}
	}
	return &tcpChecker{addr: addr, timeout: h.Timeout}
}

type httpChecker struct {
	url    string
	client *http.Client
}

func (c *httpChecker) Check(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "eurekube-registrar")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", c.url, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: HTTP %d", c.url, resp.StatusCode)
	}
	return nil
}

type tcpChecker struct {
	addr    string
	timeout time.Duration
}

func (c *tcpChecker) Check(ctx context.Context) error {
	d := net.Dialer{Timeout: c.timeout}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("connect %s: %w", c.addr, err)
	}
	return conn.Close()
}

// Gate turns probe results into a health verdict with thresholds, like a
// kubelet readiness probe: unhealthy until SuccessThreshold consecutive
// successes, healthy until FailureThreshold consecutive failures.
type Gate struct {
	successThreshold, failureThreshold int
	healthy                            bool
	successes, failures                int
}

// NewGate starts unhealthy.
func NewGate(successThreshold, failureThreshold int) *Gate {
	return &Gate{successThreshold: max(1, successThreshold), failureThreshold: max(1, failureThreshold)}
}

// Observe records one probe result and returns whether the app is healthy.
func (g *Gate) Observe(err error) bool {
	if err == nil {
		g.successes++
		g.failures = 0
		if !g.healthy && g.successes >= g.successThreshold {
			g.healthy = true
		}
	} else {
		g.failures++
		g.successes = 0
		if g.healthy && g.failures >= g.failureThreshold {
			g.healthy = false
		}
	}
	return g.healthy
}
