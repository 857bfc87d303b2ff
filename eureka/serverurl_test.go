package eureka_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/webhook/webhooktest"
)

func TestCheckServerURL_RefusesCredentialsNotAnAtSignInThePath(t *testing.T) {
	for raw, want := range map[string]error{
		"http://eureka:8761/eureka":                nil,
		"https://eureka/eureka/":                   nil,
		"http://[::1]:8761/eureka":                 nil,
		"http://eureka/eureka/team@orders":         nil,
		"http://eureka/eureka?owner=ops@example":   eureka.ErrQueryOrFragmentInURL,
		"http://eureka/eureka#a@b":                 eureka.ErrQueryOrFragmentInURL,
		"http://orders:s3cret@eureka:8761/eureka":  eureka.ErrCredentialsInURL,
		"http://orders@eureka:8761/eureka":         eureka.ErrCredentialsInURL,
		"https://:s3cret@eureka/eureka":            eureka.ErrCredentialsInURL,
		"http://@eureka/eureka":                    eureka.ErrCredentialsInURL,
		"HTTP://orders:s3cret@eureka/eureka?x=a@b": eureka.ErrCredentialsInURL,
	} {
		if err := eureka.CheckServerURL(raw); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("CheckServerURL(%q) = %v, want %v", raw, err, want)
		}
	}
	for _, raw := range []string{"", "eureka:8761", "/eureka", "ftp://eureka/", "http://:8761/eureka", "http:///eureka", "http://eu reka/"} {
		if err := eureka.CheckServerURL(raw); err == nil || errors.Is(err, eureka.ErrCredentialsInURL) {
			t.Errorf("CheckServerURL(%q) = %v, want: not an absolute http(s) URL with a host", raw, err)
		}
	}
}

// serverURLParts compose the URLs both rules are asked about: each part
// with the forms a user writes and the edges where parsers differ.
var serverURLParts = [][]string{
	{"http", "HTTPS", "ftp"},
	{"://", ":"},
	{"", "orders:s3cret@", "orders@", ":s3cret@", "@", "or%40ders:s%3Acret@", "orders:s3@cret@", "a b:c@"},
	{"eureka:8761", "[::1]:8761", "", ":8761", "eu_reka", "%zz"},
	{"", "/eureka/team@orders", "?owner=ops@example", "/e#a@b", "/%zz", "#x:y@z/", "/a,b"},
}

// The CRD's CEL rules on spec.eureka.serviceURLs, as the API server runs
// them, admit a URL exactly when CheckServerURL, which every other way in
// (--eureka-url, the registrar, the client) follows, accepts it; and a URL
// with credentials is refused with the message that points to the Secret,
// one with a query or a fragment with the message that names it (unless it
// may hold a password) and says to write the base URL alone.
func TestServerURL_CRDAndGoAgree(t *testing.T) {
	var each func(prefix string, parts [][]string)
	each = func(prefix string, parts [][]string) {
		if len(parts) == 0 {
			crdAndGoAgree(t, prefix)
			return
		}
		for _, p := range parts[0] {
			each(prefix+p, parts[1:])
		}
	}
	each("", serverURLParts)
}

func FuzzServerURL_CRDAndGoAgree(f *testing.F) {
	for _, seed := range []string{"http://orders:s3cret@eureka:8761/eureka", "http://eureka/a@b", "https://eureka?x=@", "http://[::1%25eth0]:80/", "http://eureka/eureka?zone=a", "http://eureka:8761/e#apps", "http://u:p@e/?x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 2048 { // the CRD's maxLength
			return
		}
		crdAndGoAgree(t, raw)
	})
}

func crdAndGoAgree(t *testing.T, raw string) {
	t.Helper()
	goErr := eureka.CheckServerURL(raw)
	_, crdErr := webhooktest.AdmitSyncer(builders.Syncer("shop", "orders", builders.EurekaURLs(raw)))
	if (goErr == nil) != (crdErr == nil) {
		t.Fatalf("serviceURL %q: the CRD says %v, CheckServerURL says %v", raw, crdErr, goErr)
	}
	if errors.Is(goErr, eureka.ErrCredentialsInURL) && !strings.Contains(crdErr.Error(), "serviceURLs "+eureka.ErrCredentialsInURL.Error()) {
		t.Fatalf("serviceURL %q: the CRD says %v, want %q", raw, crdErr, eureka.ErrCredentialsInURL)
	}
	// The value is named, but never one that may hold a password.
	if errors.Is(goErr, eureka.ErrQueryOrFragmentInURL) {
		named := "serviceURL " + raw + " " + eureka.ErrQueryOrFragmentInURL.Error()
		if strings.Contains(raw, "@") {
			named = "serviceURL " + eureka.ErrQueryOrFragmentInURL.Error()
		}
		// The CRD's message is JSON: each byte that is not UTF-8 comes
		// back as one U+FFFD (strings.ToValidUTF8 would make a run of them
		// one, which the fuzzer found with "\xf2\xf2").
		if named = perByteValidUTF8(named); !strings.Contains(crdErr.Error(), named) {
			t.Fatalf("serviceURL %q: the CRD says %v, want %q", raw, crdErr, named)
		}
	}
}

// perByteValidUTF8 is s with each byte that is not part of valid UTF-8
// replaced by U+FFFD, as Go's encoding/json writes it.
func perByteValidUTF8(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// Redact hides the password of a URL wherever it stands in text: the
// redacted text is the same whatever the password was, and a URL without
// one is left as it is.
func FuzzRedact_TheTextNoLongerDependsOnThePassword(f *testing.F) {
	f.Add("orders", "s3cret", "other", 0, "/eureka")
	f.Add("", "p@ss:w/rd?#", "x", 1, "/a@b")
	f.Add("o:r", "&<\"'>\\", "", 2, "?q=u:p@h")
	f.Add("ü", "パス", "s3cret", 3, "/x://a:b@c")
	f.Add("u", "p", "q", 2, "/://") // a URL's path ending "://" before the next URL
	f.Fuzz(func(t *testing.T, user, password, other string, host int, path string) {
		hosts := []string{"eureka", "eureka:8761", "10.0.0.7:8761", "[::1]:8761"}
		u := &url.URL{Scheme: "http", Host: hosts[uint(host)%uint(len(hosts))], Path: path}
		plain := u.String()
		if got := eureka.Redact(plain); got != plain && !strings.Contains(path, "://") {
			t.Fatalf("Redact(%q) = %q, want it unchanged: it has no password", plain, got)
		}
		with := func(pw string) *url.URL {
			c := *u
			c.User = url.UserPassword(user, pw)
			return &c
		}
		a, b := with(password), with(other)
		if got, want := eureka.Redact(a.String()), a.Redacted(); got != want && !strings.Contains(path, "://") {
			t.Fatalf("Redact(%q) = %q, want %q as url.URL.Redacted", a, got, want)
		}
		for name, render := range textsQuoting {
			if ra, rb := eureka.Redact(render(a.String())), eureka.Redact(render(b.String())); ra != rb {
				t.Fatalf("%s: with password %q: %s\nwith password %q: %s", name, password, ra, other, rb)
			}
		}
	})
}

// textsQuoting are the ways a URL reaches what is printed.
var textsQuoting = map[string]func(u string) string{
	"the URL": func(u string) string { return u },
	"quoted":  func(u string) string { return fmt.Sprintf("Eureka server URL %q: refused", u) },
	"a list":  func(u string) string { return fmt.Sprint([]string{"http://a:8761/eureka", u, "https://b/eureka"}) },
	"a url.Error": func(u string) string {
		return (&url.Error{Op: "Get", URL: u + "/apps/ORDERS", Err: errors.New("EOF")}).Error()
	},
	"a JSON log field": func(u string) string { raw, _ := json.Marshal(map[string]any{"urls": []string{u}}); return string(raw) },
	"two in a line":    func(u string) string { return u + " then " + u + "," + u },
}

// A password never reaches what the client prints: New refuses a URL with
// one, naming it redacted, and a server that redirects to one (a Location
// with user:password@, which net/http follows) gets an error and debug
// lines without it.
func TestClient_NeverShowsAURLsPassword(t *testing.T) {
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	log.SetLevel(logrus.DebugLevel)
	log.SetFormatter(&logrus.JSONFormatter{})

	_, err := eureka.New(eureka.Options{URLs: []string{"http://orders:s3cret@eureka:8761/eureka"}, Logger: log})
	if !errors.Is(err, eureka.ErrCredentialsInURL) || !strings.Contains(err.Error(), "orders:xxxxx@eureka") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("New with a password in the URL: %v, want ErrCredentialsInURL naming the URL redacted", err)
	}

	dead := strings.Replace(closedPortURL(t), "http://", "http://orders:s3cret@", 1)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, dead+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	c, err := eureka.New(eureka.Options{URLs: []string{redirecting.URL + "/eureka", closedPortURL(t)}, Logger: log, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Heartbeat(ctx(t), "ORDERS", "pod-1", time.Time{})
	if !errors.Is(err, eureka.ErrUnavailable) {
		t.Fatalf("heartbeat through a redirect to a closed port: %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
	if !strings.Contains(logs.String(), "trying the next one") {
		t.Errorf("no debug line about the failed server: %s", logs.String())
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("the log shows the password:\n%s", logs.String())
	}
}
