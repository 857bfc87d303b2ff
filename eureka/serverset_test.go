package eureka_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/eureka"
)

// Spellings of one server: case, default port, leading zeros, trailing
// slashes, escapes of unreserved characters, dot segments; each is the
// same canonical URL.
func TestCanonicalServerURL_SpellingsOfOneServerAreOneURL(t *testing.T) {
	for want, spellings := range map[string][]string{
		"http://eureka:8761/eureka": {
			"http://eureka:8761/eureka", "HTTP://EUREKA:8761/eureka", "http://Eureka:8761/eureka/", "http://eureka:8761/eureka//",
			"http://eureka:08761/eureka", "http://eureka:8761/%65ureka", "http://eureka:8761/x/../eureka", "http://eureka:8761/./eureka/.",
		},
		"http://eureka/eureka":         {"http://eureka:80/eureka", "http://eureka:/eureka", "http://EUREKA:0080/eureka/"},
		"https://eureka.corp":          {"https://eureka.corp:443/", "HTTPS://eureka.CORP", "https://eureka.corp/a/.."},
		"https://eureka.corp:80":       {"https://eureka.corp:80/"},
		"http://[::1]:8761/eureka":     {"http://[::1]:8761/eureka/", "http://[::1]:8761/eureka"},
		"http://[fe80::a]/eureka":      {"http://[FE80::A]:80/eureka"},
		"http://eureka/a%2Fb%3F":       {"http://eureka/a%2fb%3f/"},
		"http://eureka/Eureka/Team%40": {"http://eureka/Eureka/Team%40/", "http://eureka/Eureka/Team%40"},
	} {
		for _, raw := range spellings {
			got, err := eureka.CanonicalServerURL(raw)
			if err != nil || got != want {
				t.Errorf("CanonicalServerURL(%q) = %q, %v; want %q", raw, got, err, want)
			}
		}
	}
}

// A server set keeps the order of failover and drops duplicates, however
// spelt; a refused URL is named with its place.
func TestServerSet_KeepsOrderDropsDuplicates(t *testing.T) {
	got, err := eureka.ServerSet([]string{"http://b:8761/eureka/", "http://A:8761/eureka", "HTTP://b:8761/eureka", "http://a:8761/eureka/"})
	if want := []string{"http://b:8761/eureka", "http://a:8761/eureka"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ServerSet = %q, %v; want %q", got, err, want)
	}
	_, err = eureka.ServerSet([]string{"http://a/eureka", "http://b/eureka?zone=1"})
	if !errors.Is(err, eureka.ErrQueryOrFragmentInURL) || !strings.Contains(err.Error(), `[1] "http://b/eureka?zone=1"`) {
		t.Errorf("ServerSet with a query: %v, want ErrQueryOrFragmentInURL naming [1] and the URL", err)
	}
}

// A query or a fragment is refused wherever a URL enters: the request
// would be the base URL with the path swallowed.
func TestCheckServerURL_RefusesQueryAndFragment(t *testing.T) {
	for _, raw := range []string{"http://eureka/eureka?", "http://eureka/eureka?zone=a", "http://eureka/eureka#apps", "http://eureka?x", "http://eureka/#", "https://eureka:8761/e/?a#b"} {
		if err := eureka.CheckServerURL(raw); !errors.Is(err, eureka.ErrQueryOrFragmentInURL) {
			t.Errorf("CheckServerURL(%q) = %v, want ErrQueryOrFragmentInURL", raw, err)
		}
	}
	for _, raw := range []string{"http://eureka/eureka%3Fzone%3Da", "http://eureka/eureka%23apps"} {
		if err := eureka.CheckServerURL(raw); err != nil {
			t.Errorf("CheckServerURL(%q) = %v, want nil: an escaped ? or # is part of the path", raw, err)
		}
	}
}

// canonicalParts compose server URLs from distinct servers (scheme, host,
// port, path) and their spellings (case, default port, leading zeros,
// escapes, dot segments, trailing slashes).
var canonicalParts = [][]string{
	{"http", "HTTPS", "Http"},
	{"://"},
	{"eureka", "EUREKA", "eureka2", "10.0.0.7", "[::1]", "[FE80::1%25Eth0]"},
	{"", ":", ":80", ":443", ":8761", ":08761", ":0"},
	{"", "/", "/eureka", "/Eureka/", "/eureka//", "/%65ureka", "/a/../eureka", "/./eureka/.", "/a%2fb", "/a%2Fb/", "/~x", "/%7Ex", "/%2e%2E/eureka"},
}

// Over every composed URL: the canonical form is accepted by
// CheckServerURL and is a fixed point (canonical(canonical(x)) ==
// canonical(x)); two URLs have the same canonical form exactly when they
// name the same server (scheme, host, port with the default filled in,
// path as a server resolves it).
func TestCanonicalServerURL_IdempotentAndCollidesOnlyForTheSameServer(t *testing.T) {
	byCanonical := map[string]string{} // canonical form -> the server it names
	byServer := map[string]string{}    // the server -> its canonical form
	var each func(prefix string, parts [][]string, server []string)
	each = func(prefix string, parts [][]string, server []string) {
		if len(parts) == 0 {
			canonicalIsAFixedPoint(t, prefix)
			got, err := eureka.CanonicalServerURL(prefix)
			if err != nil {
				return
			}
			id := strings.Join(server, " ")
			if other, ok := byCanonical[got]; ok && other != id {
				t.Errorf("%q and another URL of a distinct server (%s, not %s) are both %q", prefix, other, id, got)
			}
			if other, ok := byServer[id]; ok && other != got {
				t.Errorf("%q is %q, another spelling of the same server (%s) is %q", prefix, got, id, other)
			}
			byCanonical[got], byServer[id] = id, got
			return
		}
		for _, p := range parts[0] {
			each(prefix+p, parts[1:], append(slices.Clone(server), serverPart(len(server), server, p)))
		}
	}
	each("", canonicalParts, nil)
	if len(byCanonical) < 100 {
		t.Fatalf("only %d distinct servers composed", len(byCanonical))
	}
}

// serverPart is what part p (the i-th of a composed URL; server holds the
// earlier ones) says of the server, whatever its spelling.
func serverPart(i int, server []string, p string) string {
	switch i {
	case 0, 2: // scheme, host
		if strings.HasPrefix(p, "[FE80") {
			return "[fe80::1%25Eth0]" // a zone keeps its case
		}
		return strings.ToLower(p)
	case 3: // port
		port := strings.TrimLeft(strings.TrimPrefix(p, ":"), "0")
		if p == ":0" {
			port = "0"
		}
		if port == "" || server[0] == "http" && port == "80" || server[0] == "https" && port == "443" {
			return "default"
		}
		return port
	case 4: // path
		switch p {
		case "", "/":
			return ""
		case "/a%2fb", "/a%2Fb/":
			return "/a%2Fb"
		case "/~x", "/%7Ex":
			return "/~x"
		case "/Eureka/":
			return "/Eureka"
		}
		return "/eureka"
	}
	return p
}

func canonicalIsAFixedPoint(t *testing.T, raw string) {
	t.Helper()
	once, err := eureka.CanonicalServerURL(raw)
	if (err == nil) != (eureka.CheckServerURL(raw) == nil) {
		t.Fatalf("CanonicalServerURL(%q): %v, but CheckServerURL says %v", raw, err, eureka.CheckServerURL(raw))
	}
	if err != nil {
		return
	}
	twice, err := eureka.CanonicalServerURL(once)
	if err != nil || twice != once {
		t.Fatalf("CanonicalServerURL(%q) = %q, and of that %q, %v: not a fixed point", raw, once, twice, err)
	}
}

// The canonical form of any URL CheckServerURL accepts is accepted too and
// is its own canonical form.
func FuzzCanonicalServerURL_IsAFixedPoint(f *testing.F) {
	for _, seed := range []string{"HTTP://Eureka:08761/%65ureka/./x/../", "http://[::1%25eth0]:80/", "https://e/%2e%2e/%7E//", "http://e/a/..%2F..", "http://e/.%2E/b/."} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 2048 {
			return
		}
		canonicalIsAFixedPoint(t, raw)
	})
}

// ExampleServerSet shows spellings of two servers becoming one set.
func ExampleServerSet() {
	set, _ := eureka.ServerSet([]string{"HTTP://Eureka-1:8761/eureka/", "http://eureka-2:80/eureka", "http://eureka-1:8761/eureka"})
	fmt.Println(set)
	// Output: [http://eureka-1:8761/eureka http://eureka-2/eureka]
}
