package eureka

import (
	"errors"
	"net/url"
	"strings"
	"unicode"
)

// ErrCredentialsInURL: a server URL carries credentials (user:password@).
// A password there leaks into every place the URL is shown (the pod's
// environment, logs, errors, conditions, Events), so it is refused
// wherever a URL enters, and credentials come from a Secret instead.
var ErrCredentialsInURL = errors.New("must not carry credentials (user:password@): put them in a Secret named by spec.eureka.credentialsSecretRef")

// errCommaInURL: the registrar's environment lists its URLs separated by
// commas, so a URL holds none.
var errCommaInURL = errors.New("must not contain a comma, which separates the registrar's URLs: write it %2C")

// ErrQueryOrFragmentInURL: a server URL carries a query (?) or a fragment
// (#). Every request is built as the base URL followed by a path
// (/apps/ORDERS), so a query or fragment in the base would swallow that
// path: the request would go to the base itself, or carry the path as a
// parameter.
var ErrQueryOrFragmentInURL = errors.New("must not carry a query (?) or a fragment (#): requests are the base URL followed by a path, so write the base URL alone, such as http://eureka:8761/eureka")

// errNotServerURL: a server URL that is not an absolute http(s) URL with a
// host.
var errNotServerURL = errors.New("want an absolute http:// or https:// URL with a host, such as http://eureka:8761/eureka")

// CheckServerURL is the one rule of a Eureka server's base URL, wherever one
// enters: spec.eureka.serviceURLs of a syncer, the manager's --eureka-url,
// the registrar's environment, New. The URL is absolute http or https, has
// a host, and carries no credentials, no query, no fragment and no comma.
// The CRD's CEL rules on serviceURLs say the same (a property test holds
// them together), so it parses as the API server's CEL url library does:
// url.ParseRequestURI, then url.Parse. The error says what is wrong, without the URL: the
// caller names it, through Redact.
func CheckServerURL(raw string) error {
	_, requestErr := url.ParseRequestURI(raw)
	u, err := url.Parse(raw)
	if requestErr != nil || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return errNotServerURL
	}
	if u.User != nil {
		return ErrCredentialsInURL
	}
	if strings.ContainsAny(raw, "?#") {
		return ErrQueryOrFragmentInURL
	}
	if strings.Contains(raw, ",") {
		return errCommaInURL
	}
	return nil
}

// redactedPassword stands for a password, as url.URL.Redacted writes it.
const redactedPassword = "xxxxx"

// Redact returns s with the password of every URL in it replaced by
// "xxxxx", as url.URL.Redacted does: s may be one URL, or any text that
// quotes URLs (an error, a log field, a registrar's last words, a condition
// an older manager wrote). It needs no valid URL, so it also hides the
// password of a URL a parser refused. Everything Eurekube prints that may
// hold a Eureka server URL goes through it.
func Redact(s string) string {
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		start := i + len("://")
		end := strings.IndexFunc(rest[start:], endsAuthority)
		if end < 0 {
			end = len(rest) - start
		}
		authority := rest[start : start+end]
		// As url.Parse: the userinfo ends at the authority's last '@', the
		// username at the userinfo's first ':'.
		at := strings.LastIndex(authority, "@")
		colon := -1
		if at >= 0 {
			colon = strings.Index(authority[:at], ":")
		}
		if colon < 0 {
			// Past "://" only: the text after it may begin another URL
			// ("…/://,http://…").
			b.WriteString(rest[:start])
			rest = rest[start:]
			continue
		}
		b.WriteString(rest[:start+colon+1])
		b.WriteString(redactedPassword)
		rest = rest[start+at:]
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(rest)
	return b.String()
}

// RedactAll is Redact of each of urls, for a log field or a message that
// lists them.
func RedactAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = Redact(u)
	}
	return out
}

// endsAuthority is true for a character that ends a URL's authority: the
// path, query or fragment begins, or the URL ends within text (a space, a
// quote; none of them may stand unescaped in a URL's userinfo). A
// backslash does not: JSON and Go's %q escape characters of a password with
// one.
func endsAuthority(r rune) bool {
	switch r {
	case '/', '?', '#', '"', '<', '>', '`', '{', '}', '|', '^':
		return true
	}
	return unicode.IsSpace(r) || unicode.IsControl(r)
}

// redactURLError redacts the URL a *url.Error names: url.Parse's (a request
// that cannot be built) quotes it whole; net/http's masks the password
// with "***", and then says "xxxxx" as everything else.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = Redact(ue.URL)
	}
	return err
}
