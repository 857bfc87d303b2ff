package allowlist

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Hosts is a parsed Eureka host allowlist. The zero value allows no host.
type Hosts struct {
	any      bool
	patterns []hostPattern
}

// hostPattern is one parsed host pattern.
type hostPattern struct {
	// host is lower-case, without a trailing dot; an IP in its canonical
	// form. With wildcard, the suffix below which every name is allowed.
	host     string
	wildcard bool
	// port is "" for every port.
	port string
}

// ParseHosts parses host patterns (the package doc gives their syntax),
// reporting every bad one at once.
func ParseHosts(patterns []string) (Hosts, error) {
	var h Hosts
	var errs []error
	for _, p := range patterns {
		if p == "*" {
			h.any = true
			continue
		}
		hp, err := parseHostPattern(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", p, err))
			continue
		}
		h.patterns = append(h.patterns, hp)
	}
	if len(errs) > 0 {
		return Hosts{}, errors.Join(errs...)
	}
	return h, nil
}

func parseHostPattern(p string) (hostPattern, error) {
	const want = "want a host or host:port such as eureka.example.com:8761, *.example.com for every name below example.com, or * for every host"
	host, port := p, ""
	switch {
	case strings.HasPrefix(p, "["):
		end := strings.Index(p, "]")
		if end < 0 {
			return hostPattern{}, errors.New(want)
		}
		host, port = p[1:end], p[end+1:]
		if port != "" {
			if !strings.HasPrefix(port, ":") {
				return hostPattern{}, errors.New(want)
			}
			port = port[1:]
		}
		if net.ParseIP(host) == nil {
			return hostPattern{}, fmt.Errorf("%q in brackets is not an IPv6 address", host)
		}
	case strings.Count(p, ":") > 1:
		return hostPattern{}, errors.New("write an IPv6 address in brackets, such as [fd00::1]:8761")
	case strings.Contains(p, ":"):
		host, port, _ = strings.Cut(p, ":")
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return hostPattern{}, fmt.Errorf("port %q: want 1 to 65535", port)
		}
	}
	hp := hostPattern{port: port}
	suffix, wildcard := strings.CutPrefix(host, "*.")
	name := canonicalHost(suffix)
	if net.ParseIP(name) == nil {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return hostPattern{}, fmt.Errorf("%s: %s", want, strings.Join(msgs, "; "))
		}
		if wildcard && isNumeric(name[strings.LastIndex(name, ".")+1:]) {
			// *.0.0.1 would allow 127.0.0.1: a wildcard is for names.
			return hostPattern{}, errors.New("a wildcard stands for DNS names, not IP addresses")
		}
	} else if wildcard {
		return hostPattern{}, errors.New("a wildcard stands for DNS names, not IP addresses")
	}
	hp.host, hp.wildcard = name, wildcard
	return hp, nil
}

// HostsOf is the list that allows exactly the hosts and ports of urls (the
// manager's own --eureka-url); a URL that does not parse adds nothing.
func HostsOf(urls []string) Hosts {
	var h Hosts
	for _, raw := range urls {
		if host, port, err := hostPort(raw); err == nil {
			h.patterns = append(h.patterns, hostPattern{host: host, port: port})
		}
	}
	return h
}

// AllowsURL reports whether the list allows the host and port of the
// http(s) URL raw. A URL that does not parse is not allowed.
func (h Hosts) AllowsURL(raw string) bool {
	host, port, err := hostPort(raw)
	if err != nil {
		return false
	}
	if h.any {
		return true
	}
	ip := net.ParseIP(host) != nil
	for _, p := range h.patterns {
		if p.port != "" && p.port != port {
			continue
		}
		if !p.wildcard && p.host == host || p.wildcard && !ip && strings.HasSuffix(host, "."+p.host) {
			return true
		}
	}
	return false
}

// Patterns is the list as host patterns, in a stable order, for logs and
// messages.
func (h Hosts) Patterns() []string {
	var out []string
	if h.any {
		out = append(out, "*")
	}
	for _, p := range h.patterns {
		host := p.host
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		if p.wildcard {
			host = "*." + host
		}
		if p.port != "" {
			host += ":" + p.port
		}
		out = append(out, host)
	}
	slices.Sort(out)
	return out
}

// HostOf is the host:port of the URL raw as the lists match it (the port
// explicit, or the scheme's), for messages: never the URL itself, which may
// hold a password.
func HostOf(raw string) string {
	host, port, err := hostPort(raw)
	if err != nil {
		return "(not a URL)"
	}
	return net.JoinHostPort(host, port)
}

// hostPort is the canonical host and the port of an http(s) URL: the
// explicit port, else 80 or 443.
func hostPort(raw string) (host, port string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", err
	}
	host = canonicalHost(u.Hostname())
	if host == "" {
		return "", "", errors.New("no host")
	}
	port = u.Port()
	switch {
	case port != "":
	case strings.EqualFold(u.Scheme, "http"):
		port = "80"
	case strings.EqualFold(u.Scheme, "https"):
		port = "443"
	default:
		return "", "", fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	return host, port, nil
}

// canonicalHost is host lower-cased without a trailing dot, an IP address
// in its canonical form.
func canonicalHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return host
}

func isNumeric(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}
