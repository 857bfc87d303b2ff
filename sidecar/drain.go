package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The drain helper. An app container whose own preStop hook must run as an
// exec or an HTTP GET cannot also get the kubelet's sleep action (a
// container has one preStop), and a distroless image has neither a shell
// nor a sleep binary. So the registrar binary doubles as the helper: an
// init container copies it into a volume (InstallDrainCommand), and the
// app container's preStop execs it (DrainCommand), which waits for the
// drain and then runs the container's own hook, as the kubelet would have.
// The webhook writes these arguments (Drain.Args) and cmd/registrar parses
// them (ParseDrain): this file is the whole contract between the two.
const (
	// DrainCommand is the registrar's subcommand that drains, then runs the
	// container's own hook.
	DrainCommand = "drain"
	// InstallDrainCommand is the registrar's subcommand that copies its own
	// binary into a directory, as DrainBinary.
	InstallDrainCommand = "install-drain"
	// DrainBinary is the helper's file name in the shared volume.
	DrainBinary = "eurekube-drain"
)

// Drain is what the helper does in a container's preStop: wait, then run
// the container's own hook, if it had one.
type Drain struct {
	// Wait is how long the container keeps serving first.
	Wait time.Duration
	// HTTPGet is the container's own httpGet hook.
	HTTPGet *DrainHTTPGet
	// Command is the container's own exec hook.
	Command []string
}

// DrainHTTPGet is a kubelet httpGet action with its port resolved to a
// number.
type DrainHTTPGet struct {
	// Scheme is HTTP or HTTPS (certificates are not verified, as the
	// kubelet does not verify them).
	Scheme string
	// Host is empty for the pod's own IP.
	Host    string
	Port    int32
	Path    string
	Headers []DrainHeader
}

// DrainHeader is one header of DrainHTTPGet.
type DrainHeader struct{ Name, Value string }

// Args renders d as the helper's arguments after DrainCommand.
func (d Drain) Args() []string {
	args := []string{"-wait=" + d.Wait.String()}
	if h := d.HTTPGet; h != nil {
		args = append(args, "-http-scheme="+h.Scheme, "-http-host="+h.Host,
			"-http-port="+strconv.Itoa(int(h.Port)), "-http-path="+h.Path)
		for _, hd := range h.Headers {
			args = append(args, "-http-header="+hd.Name+":"+hd.Value)
		}
	}
	if len(d.Command) > 0 {
		args = append(append(args, "--"), d.Command...)
	}
	return args
}

// ParseDrain parses the helper's arguments after DrainCommand.
func ParseDrain(args []string, stderr io.Writer) (Drain, error) {
	fs := flag.NewFlagSet(DrainCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var d Drain
	var h DrainHTTPGet
	var headers headerFlags
	port := fs.Int("http-port", 0, "port of the container's own httpGet hook (0: none)")
	fs.DurationVar(&d.Wait, "wait", 0, "how long to keep serving before the container's own hook")
	fs.StringVar(&h.Scheme, "http-scheme", "HTTP", "scheme of the httpGet hook: HTTP or HTTPS")
	fs.StringVar(&h.Host, "http-host", "", "host of the httpGet hook (empty: the pod's IP)")
	fs.StringVar(&h.Path, "http-path", "/", "path of the httpGet hook")
	fs.Var(&headers, "http-header", "Name:Value header of the httpGet hook (repeatable)")
	if err := fs.Parse(args); err != nil {
		return Drain{}, err
	}
	if d.Wait < 0 {
		return Drain{}, fmt.Errorf("-wait=%s: want a duration of 0 or more", d.Wait)
	}
	if *port != 0 {
		if *port < 1 || *port > 65535 {
			return Drain{}, fmt.Errorf("-http-port=%d: want a port number from 1 to 65535", *port)
		}
		if h.Scheme != "HTTP" && h.Scheme != "HTTPS" {
			return Drain{}, fmt.Errorf("-http-scheme=%s: want HTTP or HTTPS", h.Scheme)
		}
		h.Port, h.Headers = int32(*port), headers
		d.HTTPGet = &h
	}
	if rest := fs.Args(); len(rest) > 0 {
		d.Command = rest
	}
	if d.HTTPGet != nil && d.Command != nil {
		return Drain{}, errors.New("an httpGet hook and a command: a preStop hook is one or the other")
	}
	return d, nil
}

type headerFlags []DrainHeader

func (h *headerFlags) String() string { return fmt.Sprint(*h) }

func (h *headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok || name == "" {
		return fmt.Errorf("%q: want Name:Value", v)
	}
	*h = append(*h, DrainHeader{Name: name, Value: value})
	return nil
}

// Run waits, then runs the container's own hook. The kubelet bounds it by
// the pod's grace period, so neither step has a timeout of its own, as the
// kubelet gives the hooks it runs none.
func (d Drain) Run(ctx context.Context, stdout, stderr io.Writer) error {
	select {
	case <-time.After(d.Wait):
	case <-ctx.Done():
		return ctx.Err()
	}
	switch {
	case d.HTTPGet != nil:
		return d.HTTPGet.do(ctx)
	case len(d.Command) > 0:
		cmd := exec.CommandContext(ctx, d.Command[0], d.Command[1:]...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("preStop command %q: %w", d.Command, err)
		}
	}
	return nil
}

// do performs the hook as the kubelet does: to the pod's IP unless a host
// is named, any certificate accepted, success on 2xx and 3xx.
func (h *DrainHTTPGet) do(ctx context.Context) error {
	host := h.Host
	if host == "" {
		host = podIP()
	}
	u := url.URL{Scheme: strings.ToLower(h.Scheme), Host: net.JoinHostPort(host, strconv.Itoa(int(h.Port))), Path: h.Path}
	if path, query, ok := strings.Cut(h.Path, "?"); ok {
		u.Path, u.RawQuery = path, query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("preStop httpGet %s: %w", u.String(), err)
	}
	req.Header.Set("User-Agent", "eurekube-drain")
	for _, hd := range h.Headers {
		req.Header.Add(hd.Name, hd.Value)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec G402 -- as the kubelet
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("preStop httpGet %s: %w", u.String(), err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("preStop httpGet %s: %s", u.String(), resp.Status)
	}
	return nil
}

// podIP is the first non-loopback IPv4 address of the pod's network
// namespace (its eth0), where the kubelet would have sent the hook; the app
// container has no downward-API variable of Eurekube's to read it from.
func podIP() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// InstallDrain copies the running binary into dir as DrainBinary, readable
// and executable by every user, since the app container may run as any.
func InstallDrain(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install drain helper: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("install drain helper: %w", err)
	}
	defer src.Close()
	target := filepath.Join(dir, DrainBinary)
	tmp, err := os.CreateTemp(dir, DrainBinary+".*")
	if err != nil {
		return fmt.Errorf("install drain helper into %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("install drain helper into %s: %w", dir, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return fmt.Errorf("install drain helper into %s: %w", dir, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install drain helper into %s: %w", dir, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return fmt.Errorf("install drain helper into %s: %w", dir, err)
	}
	return nil
}
