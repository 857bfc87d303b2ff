package allowlist

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestParseImages_RefusesBadPatternsNamingEach(t *testing.T) {
	for _, p := range []string{
		"",
		"registry.example.com/team*",   // would allow team-evil
		"registry.example.com/*/agent", // "*" inside
		"registry.example.com/Team/x",  // upper-case path
		"has space:1",
		"**",
	} {
		_, err := ParseImages([]string{"eurekube/registrar:v1", p})
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(p)) {
			t.Errorf("ParseImages(%q) = %v, want an error naming it", p, err)
		}
	}
}

func TestImages_AllowWhatThePatternsSay(t *testing.T) {
	l, err := ParseImages([]string{
		"registry.example.com/eurekube/registrar:v1.2.0",
		"registry.example.com/platform/*",
		"ghcr.io/acme/registrar:*",
		"quay.io/acme/registrar@*",
	})
	if err != nil {
		t.Fatal(err)
	}
	digest := "@sha256:" + strings.Repeat("ab", 32)
	cases := []struct {
		image string
		want  bool
	}{
		{"registry.example.com/eurekube/registrar:v1.2.0", true},
		{"registry.example.com/eurekube/registrar:v1.2.1", false},
		{"registry.example.com/eurekube/registrar", false},
		{"registry.example.com/platform/registrar:dev", true},
		{"registry.example.com/platform/team/agent" + digest, true},
		{"registry.example.com/platformer/agent:1", false},
		{"registry.example.com/platform/../evil:1", false},
		{"ghcr.io/acme/registrar:v2", true},
		{"ghcr.io/acme/registrar:v2" + digest, true},
		{"ghcr.io/acme/registrar-evil:v2", false},
		{"quay.io/acme/registrar" + digest, true},
		{"quay.io/acme/registrar:v1", false},
		{"eurekube/registrar:v1", false},
		{"", false},
	}
	for _, c := range cases {
		if got := l.Allows(c.image); got != c.want {
			t.Errorf("Allows(%q) = %v, want %v", c.image, got, c.want)
		}
	}
	var none Images
	if none.Allows("eurekube/registrar:v1") {
		t.Error("the zero list allows an image")
	}
	if all, _ := ParseImages([]string{"*"}); !all.Allows("anything/at:all") {
		t.Error(`"*" does not allow every image`)
	}
}

// A prefix pattern allows exactly the well-formed references below it: a
// repository prefix ("…/*") anything under it, a tag or digest prefix
// ("…:*", "…@*") nothing with a path after it, whatever the input.
func FuzzImages_APrefixAllowsOnlyWellFormedReferencesBelowIt(f *testing.F) {
	f.Add("registry:5000/evil/x")
	f.Add("registry.example.com/team/x:1")
	f.Add("registry.example.com/team-evil/x:1")
	f.Add("registry.example.com/team/x:1@sha256:" + strings.Repeat("0", 64))
	f.Add("registry/x@sha256:" + strings.Repeat("0", 64))
	f.Add("registry:v1")
	f.Fuzz(func(t *testing.T, image string) {
		for _, prefix := range []string{"registry.example.com/team/", "registry:", "registry/x@"} {
			l, err := ParseImages([]string{prefix + "*"})
			if err != nil {
				t.Fatal(err)
			}
			rest, below := strings.CutPrefix(image, prefix)
			want := below && WellFormedImage(image) && (strings.HasSuffix(prefix, "/") || !strings.Contains(rest, "/"))
			if got := l.Allows(image); got != want {
				t.Errorf("%s* allows %q: %v, want %v", prefix, image, got, want)
			}
		}
		if exact, err := ParseImages([]string{"registry.example.com/team/x:1"}); err != nil || exact.Allows(image) != (image == "registry.example.com/team/x:1") {
			t.Errorf("an exact pattern allows %q: %v (%v)", image, exact.Allows(image), err)
		}
	})
}

func TestParseHosts_RefusesBadPatternsNamingEach(t *testing.T) {
	for _, p := range []string{
		"",
		"http://eureka:8761",
		"eureka:0",
		"eureka:65536",
		"eureka:08761",
		"eureka/eureka",
		"fd00::1",
		"[eureka]:8761",
		"eu*reka",
		"*.0.0.1",
		"*.10.0.0.1",
		"user@eureka",
	} {
		_, err := ParseHosts([]string{"eureka", p})
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(p)) {
			t.Errorf("ParseHosts(%q) = %v, want an error naming it", p, err)
		}
	}
}

func TestHosts_AllowWhatThePatternsSay(t *testing.T) {
	l, err := ParseHosts([]string{"eureka.shared.svc:8761", "*.eureka.svc", "10.0.0.7", "[fd00::1]:8761", "Registry.Example.COM"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url  string
		want bool
	}{
		{"http://eureka.shared.svc:8761/eureka", true},
		{"https://EUREKA.shared.svc.:8761/eureka", true},
		{"http://eureka.shared.svc/eureka", false}, // port 80
		{"http://eureka.shared.svc:8762/eureka", false},
		{"http://eureka-0.eureka.eureka.svc:8761/eureka", true},
		{"http://a.b.eureka.svc:1/eureka", true},
		{"http://eureka.svc:8761/eureka", false},     // not below it
		{"http://evileureka.svc:8761/eureka", false}, // not a label boundary
		{"http://10.0.0.7:9/eureka", true},
		{"http://10.0.0.8:9/eureka", false},
		{"http://[fd00:0::1]:8761/eureka", true},
		{"http://[fd00::1]:8762/eureka", false},
		{"https://registry.example.com/eureka", true},
		{"http://attacker.example.net:8761/eureka", false},
		{"ftp://eureka.shared.svc:8761/eureka", true}, // the port is explicit; the CRD refuses the scheme
		{"eureka.shared.svc:8761", false},             // not a URL with a host
		{"::", false},
	}
	for _, c := range cases {
		if got := l.AllowsURL(c.url); got != c.want {
			t.Errorf("AllowsURL(%q) = %v, want %v", c.url, got, c.want)
		}
	}
	var none Hosts
	if none.AllowsURL("http://eureka:8761/eureka") {
		t.Error("the zero list allows a host")
	}
}

func TestHostsOf_AllowsExactlyTheHostsAndPortsOfTheURLs(t *testing.T) {
	own := HostsOf([]string{"http://eureka-0.eureka.eureka.svc:8761/eureka", "https://eureka.example.com/eureka", "not a url"})
	for url, want := range map[string]bool{
		"http://eureka-0.eureka.eureka.svc:8761/eureka": true,
		"https://eureka-0.eureka.eureka.svc:8761/other": true,
		"http://eureka-1.eureka.eureka.svc:8761/eureka": false,
		"http://eureka-0.eureka.eureka.svc:22/":         false,
		"https://eureka.example.com:443/eureka":         true,
		"http://eureka.example.com/eureka":              false, // port 80, not 443
	} {
		if got := own.AllowsURL(url); got != want {
			t.Errorf("AllowsURL(%q) = %v, want %v", url, got, want)
		}
	}
}

// Over generated names and ports: an exact host:port pattern allows the
// URLs of that host and port only, in any case and scheme; a wildcard
// allows every name below its suffix and nothing else; "*" allows all.
func FuzzHosts_PatternsMatchTheHostAndPortOnly(f *testing.F) {
	f.Add("eureka-0", "Eureka.Svc", uint16(8761), "/eureka")
	f.Add("a.b", "example.com", uint16(80), "")
	f.Add("x", "y", uint16(1), "/?q=1")
	f.Fuzz(func(t *testing.T, label, domain string, port uint16, path string) {
		domain = strings.Trim(domain, ".")
		if port == 0 || len(validationErrors(label+"."+domain)) > 0 || strings.Trim(path, "/abcdefghijklmnopqrstuvwxyz0123456789.-_") != "" || path != "" && path[0] != '/' {
			t.Skip()
		}
		host := label + "." + domain
		u := fmt.Sprintf("http://%s:%d%s", host, port, path)
		exact, err := ParseHosts([]string{fmt.Sprintf("%s:%d", strings.ToUpper(host), port)})
		if err != nil {
			t.Fatalf("a valid host:port refused: %v", err)
		}
		if !exact.AllowsURL(u) || !exact.AllowsURL(strings.Replace(u, "http:", "https:", 1)) {
			t.Errorf("%s:%d does not allow %s", host, port, u)
		}
		if other := fmt.Sprintf("http://%s:%d%s", host, port%65535+1, path); exact.AllowsURL(other) {
			t.Errorf("%s:%d allows another port: %s", host, port, other)
		}
		if !HostsOf([]string{u}).AllowsURL(u) {
			t.Errorf("HostsOf(%s) does not allow it", u)
		}
		wild, err := ParseHosts([]string{"*." + domain})
		if err != nil {
			t.Skip() // a numeric last label: no wildcard
		}
		if !wild.AllowsURL(u) {
			t.Errorf("*.%s does not allow %s", domain, u)
		}
		for _, outside := range []string{"http://" + domain + "/", "http://" + label + domain + "/", "http://" + domain + "." + label + "/"} {
			if wild.AllowsURL(outside) && !strings.HasSuffix(strings.ToLower(strings.TrimSuffix(outside[len("http://"):], "/")), "."+strings.ToLower(domain)) {
				t.Errorf("*.%s allows %s", domain, outside)
			}
		}
		if all, _ := ParseHosts([]string{"*"}); !all.AllowsURL(u) {
			t.Errorf(`"*" does not allow %s`, u)
		}
	})
}

// validationErrors: the generated host is a DNS name as the API accepts it.
func validationErrors(host string) []string {
	return validation.IsDNS1123Subdomain(strings.ToLower(host))
}
