package gateway_test

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/gateway"
)

// Each operation of Eureka's API, in JSON and in XML, against the real
// server directly and through the gateway: the same status and the same
// answer, field by field, timestamps aside. The writes go to two apps of
// the same shape, one directly and one through the gateway with a client's
// credentials; the reads of one app are compared against the same read
// directly, and the reads of the whole registry (apps, delta: both apps,
// the same hashcode) as they are.
func TestConformance_EveryOperationAnswersAsEurekaDoes(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	for _, format := range []string{"json", "xml"} {
		t.Run(format, func(t *testing.T) {
			conform(t, g, format)
		})
	}
}

func conform(t *testing.T, g *gw, format string) {
	direct := newApp("conf-direct-" + format)
	via := newApp("conf-gw-" + format)
	secret := "conf-" + strings.ToLower(via)
	clientSecret(t, secret, "conf-"+format, "conf-password")
	grant(t, []string{via}, nil, []string{secret})
	auth := basic("conf-"+format, "conf-password")
	mime := "application/" + format
	// rename makes an answer about via read as the same answer about
	// direct.
	rename := strings.NewReplacer(strings.ToUpper(via), strings.ToUpper(direct), strings.ToLower(via), strings.ToLower(direct), via, direct)
	instance := func(app string) instanceBody {
		return instanceBody{app: app, id: "host-1:" + strings.ToLower(app) + ":8080", host: "192.0.2.30", ip: "192.0.2.30", port: 8080,
			metadata: map[string]string{"zone": "zone-a", "version": "1"}}
	}
	body := func(b instanceBody) string {
		if format == "xml" {
			return b.xml()
		}
		return b.json()
	}
	type op struct {
		name         string
		method, path string // below /eureka/, with {APP} and {ID}
		body         func(app string) string
	}
	ops := []op{
		{name: "register", method: http.MethodPost, path: "apps/{APP}", body: func(app string) string { return body(instance(app)) }},
		{name: "register again", method: http.MethodPost, path: "apps/{APP}", body: func(app string) string { return body(instance(app)) }},
		{name: "renew", method: http.MethodPut, path: "apps/{APP}/{ID}?status=UP"},
		{name: "renew of an unknown instance", method: http.MethodPut, path: "apps/{APP}/nobody:8080"},
		{name: "renew with a newer lastDirtyTimestamp", method: http.MethodPut, path: "apps/{APP}/{ID}?status=UP&lastDirtyTimestamp=99999999999999"},
		{name: "status override", method: http.MethodPut, path: "apps/{APP}/{ID}/status?value=OUT_OF_SERVICE"},
		{name: "status override of an unknown instance", method: http.MethodPut, path: "apps/{APP}/nobody:8080/status?value=OUT_OF_SERVICE"},
		{name: "metadata update", method: http.MethodPut, path: "apps/{APP}/{ID}/metadata?version=2&team=conformance"},
		{name: "status override removed", method: http.MethodDelete, path: "apps/{APP}/{ID}/status?value=UP"},
		{name: "status override removed without value", method: http.MethodDelete, path: "apps/{APP}/{ID}/status"},
		{name: "renew after removal without value", method: http.MethodPut, path: "apps/{APP}/{ID}"},
		{name: "register after that", method: http.MethodPost, path: "apps/{APP}", body: func(app string) string { return body(instance(app)) }},
		{name: "cancel", method: http.MethodDelete, path: "apps/{APP}/{ID}"},
		{name: "cancel again", method: http.MethodDelete, path: "apps/{APP}/{ID}"},
		{name: "register to stay", method: http.MethodPost, path: "apps/{APP}", body: func(app string) string { return body(instance(app)) }},
	}
	reads := []string{"apps/{APP}", "apps/{APP}/{ID}", "instances/{ID}", "vips/{VIP}", "svips/{VIP}", "apps/{APP}/nobody:8080", "vips/no-such-vip"}
	fill := func(p, app string) string {
		return strings.NewReplacer("{APP}", strings.ToUpper(app), "{ID}", instance(app).id, "{VIP}", strings.ToLower(app)).Replace(p)
	}
	for _, o := range ops {
		d := call{method: o.method, url: server.URL() + "/" + fill(o.path, direct), accept: mime, auth: directAuth()}
		v := call{method: o.method, url: g.eurekaURL() + "/" + fill(o.path, via), accept: mime, auth: auth}
		if o.body != nil {
			d.body, d.contentType = o.body(direct), mime
			v.body, v.contentType = o.body(via), mime
		}
		da, va := do(t, d), do(t, v)
		if va.header.Get(gateway.RefusedHeader) != "" {
			t.Fatalf("%s: the gateway refused it: %d %s", o.name, va.status, va.body)
		}
		if da.status != va.status {
			t.Fatalf("%s: Eureka answered %d (%s), through the gateway %d (%s)", o.name, da.status, da.body, va.status, va.body)
		}
		same(t, o.name, format, da.body, rename.Replace(va.body))
		// After each write, every read of the app answers alike.
		for _, r := range reads {
			dr := do(t, call{method: http.MethodGet, url: server.URL() + "/" + fill(r, direct), accept: mime, auth: directAuth()})
			vr := do(t, call{method: http.MethodGet, url: g.eurekaURL() + "/" + fill(r, via), accept: mime})
			if dr.status != vr.status {
				t.Fatalf("after %s, GET %s: Eureka %d, gateway %d (%s)", o.name, r, dr.status, vr.status, vr.body)
			}
			same(t, "after "+o.name+", GET "+r, format, dr.body, rename.Replace(vr.body))
		}
	}
	// The whole registry, and its delta, read both ways: the same apps and
	// the same hashcode, so a client's delta reconciles as against Eureka.
	for _, r := range []string{"apps", "apps/", "apps/delta", "v2/apps"} {
		dr := do(t, call{method: http.MethodGet, url: server.URL() + "/" + strings.TrimPrefix(r, "v2/"), accept: mime, auth: directAuth()})
		vr := do(t, call{method: http.MethodGet, url: g.eurekaURL() + "/" + r, accept: mime})
		if dr.status != vr.status {
			t.Fatalf("GET %s: Eureka %d, gateway %d", r, dr.status, vr.status)
		}
		same(t, "GET "+r, format, dr.body, vr.body)
	}
	// gzip, as Spring's client asks for the registry.
	req, _ := http.NewRequest(http.MethodGet, g.eurekaURL()+"/apps", nil)
	req.Header.Set("Accept", mime)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("GET /apps with gzip: %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
}

func directAuth() string { return direct() }

// same compares two answers, JSON or XML, timestamps aside.
func same(t *testing.T, what, format, want, got string) {
	t.Helper()
	if strings.TrimSpace(want) == "" && strings.TrimSpace(got) == "" {
		return
	}
	var w, g any
	var err1, err2 error
	if format == "json" && strings.HasPrefix(strings.TrimSpace(want), "{") {
		err1, err2 = json.Unmarshal([]byte(want), &w), json.Unmarshal([]byte(got), &g)
	} else if strings.HasPrefix(strings.TrimSpace(want), "<") {
		w, err1 = xmlTree(want)
		g, err2 = xmlTree(got)
	} else {
		w, g = want, got
	}
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: unreadable answers: %v, %v\nEureka: %s\ngateway: %s", what, err1, err2, want, got)
	}
	w, g = untimed(w), untimed(g)
	if !reflect.DeepEqual(w, g) {
		wj, _ := json.MarshalIndent(w, "", " ")
		gj, _ := json.MarshalIndent(g, "", " ")
		t.Fatalf("%s: answers differ, timestamps aside\nEureka:\n%s\ngateway:\n%s", what, wj, gj)
	}
}

// untimed drops every field whose name says it is a time.
func untimed(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if strings.Contains(strings.ToLower(k), "timestamp") {
				continue
			}
			out[k] = untimed(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = untimed(x)
		}
		return out
	}
	return v
}

// xmlTree reads XML into maps of children by name (lists where a name
// repeats, sorted), attributes as @name, text as #text.
func xmlTree(s string) (any, error) {
	d := xml.NewDecoder(strings.NewReader(s))
	type frame struct {
		name     string
		children map[string][]any
		text     strings.Builder
	}
	var stack []*frame
	var root any
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			f := &frame{name: tok.Name.Local, children: map[string][]any{}}
			for _, a := range tok.Attr {
				f.children["@"+a.Name.Local] = []any{a.Value}
			}
			stack = append(stack, f)
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text.Write(tok)
			}
		case xml.EndElement:
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			var node any
			if len(f.children) == 0 {
				node = strings.TrimSpace(f.text.String())
			} else {
				m := map[string]any{}
				for k, vs := range f.children {
					if len(vs) == 1 {
						m[k] = vs[0]
						continue
					}
					sort.Slice(vs, func(i, j int) bool { return fmt.Sprint(vs[i]) < fmt.Sprint(vs[j]) })
					m[k] = vs
				}
				node = m
			}
			if len(stack) == 0 {
				root = map[string]any{f.name: node}
			} else {
				p := stack[len(stack)-1]
				p.children[f.name] = append(p.children[f.name], node)
			}
		}
	}
	return root, nil
}
