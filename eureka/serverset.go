package eureka

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// A server set is the list of a Eureka cluster's base URLs as Eurekube
// uses them: each in its canonical form, duplicates removed, in the order
// given (the order of failover). Every spelling of one server is one
// canonical URL, so the registry caches keyed by it hold one copy of a
// server's registry however its users write its URL, and the requests the
// client sends are the same whichever spelling it was given.

// defaultPorts are the ports a URL of each scheme means without one.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// CanonicalServerURL returns the one spelling of a server's base URL that
// CheckServerURL accepts, or its error: the scheme and host lower-cased
// (an IPv6 zone keeps its case), the scheme's default port dropped and any
// other without leading zeros, percent-escapes upper-cased and those of
// unreserved characters decoded, dot segments removed, and no trailing
// slash (RFC 3986 section 6.2.2). Applied to its own result it returns it
// unchanged.
func CanonicalServerURL(raw string) (string, error) {
	if err := CheckServerURL(raw); err != nil {
		return "", err
	}
	u, _ := url.Parse(raw) // CheckServerURL parsed it
	host := u.Hostname()
	if zone := strings.IndexByte(host, '%'); zone >= 0 {
		host = strings.ToLower(host[:zone]) + host[zone:]
	} else {
		host = strings.ToLower(host)
	}
	port := u.Port()
	if port != "" {
		port = strings.TrimLeft(port, "0")
		if port == "" {
			port = "0"
		}
	}
	if port == defaultPorts[u.Scheme] {
		port = ""
	}
	switch {
	case port != "":
		host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		host = "[" + host + "]"
	}
	base := (&url.URL{Scheme: u.Scheme, Host: host}).String()
	// EscapedPath re-escapes a path whose escapes are not all valid, and
	// leaves a comma (from %2C) bare, which no server URL may hold.
	path := strings.ReplaceAll(u.EscapedPath(), ",", "%2C")
	path = strings.TrimRight(removeDotSegments(normalizeEscapes(path)), "/")
	canonical := base + path
	if CheckServerURL(canonical) != nil {
		// An IPv6 zone that is not UTF-8 does not parse once escaped: such
		// a URL is its own spelling.
		return raw, nil
	}
	return canonical, nil
}

// ServerSet returns the server set of urls: each in its canonical form
// (CanonicalServerURL), the first of duplicates kept, in order. The error
// names the first URL refused (redacted) and its place in the list.
func ServerSet(urls []string) ([]string, error) {
	set := make([]string, 0, len(urls))
	for i, raw := range urls {
		canonical, err := CanonicalServerURL(raw)
		if err != nil {
			return nil, fmt.Errorf("URL [%d] %q: %w", i, Redact(raw), err)
		}
		if !slices.Contains(set, canonical) {
			set = append(set, canonical)
		}
	}
	return set, nil
}

// normalizeEscapes upper-cases the hex digits of every percent-escape of
// an escaped path and decodes those of unreserved characters (RFC 3986
// 6.2.2.1 and 6.2.2.2), which mean the same escaped or not.
func normalizeEscapes(escaped string) string {
	var b strings.Builder
	for i := 0; i < len(escaped); i++ {
		c := escaped[i]
		if c != '%' || i+2 >= len(escaped) {
			b.WriteByte(c)
			continue
		}
		v, err := strconv.ParseUint(escaped[i+1:i+3], 16, 8)
		if err != nil {
			b.WriteByte(c)
			continue
		}
		if d := byte(v); unreserved(d) {
			b.WriteByte(d)
		} else {
			b.WriteString(strings.ToUpper(escaped[i : i+3]))
		}
		i += 2
	}
	return b.String()
}

// unreserved is RFC 3986's ALPHA / DIGIT / "-" / "." / "_" / "~".
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// removeDotSegments resolves the "." and ".." segments of an absolute path
// (RFC 3986 5.2.4), as a server resolves them: /eureka/./apps and
// /x/../eureka/apps are /eureka/apps.
func removeDotSegments(path string) string {
	if !strings.Contains(path, ".") {
		return path
	}
	segments := strings.Split(path, "/")
	out := make([]string, 0, len(segments))
	for i, seg := range segments {
		last := i == len(segments)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	return strings.Join(out, "/")
}
