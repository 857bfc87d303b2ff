package gateway

import (
	"net/http"
	"net/url"
	"strings"
)

// Operations: what a request asks of Eureka. The names are those of the
// gateway's metrics, logs and audit lines.
const (
	OpRegister     = "register"
	OpRenew        = "renew"
	OpCancel       = "cancel"
	OpStatus       = "status"        // PUT …/{id}/status?value=S
	OpStatusRemove = "status-remove" // DELETE …/{id}/status
	OpMetadata     = "metadata"      // PUT …/{id}/metadata?k=v
	OpApps         = "apps"          // GET /apps
	OpDelta        = "delta"         // GET /apps/delta
	OpApp          = "app"           // GET /apps/{APP}
	OpInstance     = "instance"      // GET /apps/{APP}/{id}
	OpInstanceByID = "instance-id"   // GET /instances/{id}
	OpVIP          = "vip"           // GET /vips/{vip}
	OpSVIP         = "svip"          // GET /svips/{vip}
)

// route is one parsed request: the operation, its app (upper-cased, as
// Eureka keys it), instance id and VIP as the path names them, and the
// path below the Eureka base URL to pass on, as the client escaped it.
type route struct {
	op       string
	app, id  string
	vip      string
	upstream string
}

// write is true for the operations that change the registry: the ones
// that need an identity.
func (r route) write() bool {
	switch r.op {
	case OpRegister, OpRenew, OpCancel, OpStatus, OpStatusRemove, OpMetadata:
		return true
	}
	return false
}

// cachedRead is true for the reads Eureka itself serves from its response
// cache, and the gateway from its own: the ones every client polls.
func (r route) cachedRead() bool {
	switch r.op {
	case OpApps, OpDelta, OpApp, OpVIP, OpSVIP:
		return true
	}
	return false
}

// routeError is a request the gateway answers itself, with Eureka's status
// code for it and a message naming the reason.
type routeError struct {
	status int
	reason string
	msg    string
}

// Reasons of the requests the gateway refuses before any identity is read.
const (
	ReasonUnknownRoute  = "UnknownRoute"
	ReasonBadMethod     = "MethodNotAllowed"
	ReasonPeersOnly     = "PeersOnly"
	ReasonMalformedPath = "MalformedPath"
)

// parseRoute maps a request to its operation. The gateway serves Eureka's
// API under /eureka/ and, as Spring Cloud's server does since 4.0, under
// /eureka/v2/ too; the answer's status codes for what it does not serve
// are the server's: 404 for an unknown path, 405 for a known path with
// another method. Peer replication and ASG routes are for Eureka's peers
// among themselves, never for clients: 403.
func parseRoute(method string, u *url.URL) (route, *routeError) {
	rest, ok := strings.CutPrefix(u.EscapedPath(), "/eureka/")
	if !ok {
		return route{}, &routeError{http.StatusNotFound, ReasonUnknownRoute, "not Eureka's API: the gateway serves /eureka/…, as a Eureka server does"}
	}
	rest = strings.TrimPrefix(rest, "v2/")
	rest = strings.TrimSuffix(rest, "/")
	raw := strings.Split(rest, "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		v, err := url.PathUnescape(s)
		if err != nil || v == "" && len(raw) > 1 {
			return route{}, &routeError{http.StatusNotFound, ReasonMalformedPath, "malformed path: an empty or badly escaped segment"}
		}
		segs[i] = v
	}
	upstream := rest
	if u.RawQuery != "" {
		upstream += "?" + u.RawQuery
	}
	r := route{upstream: upstream}
	methods := func(allowed map[string]string) (route, *routeError) {
		op, ok := allowed[method]
		if !ok {
			return route{}, &routeError{http.StatusMethodNotAllowed, ReasonBadMethod, method + " is not allowed on " + u.Path}
		}
		r.op = op
		return r, nil
	}
	switch {
	case segs[0] == "peerreplication" || segs[0] == "asg":
		return route{}, &routeError{http.StatusForbidden, ReasonPeersOnly, "/" + segs[0] + " is for Eureka's peers among themselves: they replicate to each other directly, never through the gateway"}
	case segs[0] == "apps" && len(segs) == 1:
		return methods(map[string]string{http.MethodGet: OpApps})
	case segs[0] == "apps" && len(segs) == 2 && segs[1] == "delta":
		return methods(map[string]string{http.MethodGet: OpDelta})
	case segs[0] == "apps" && len(segs) == 2:
		r.app = strings.ToUpper(segs[1])
		return methods(map[string]string{http.MethodGet: OpApp, http.MethodPost: OpRegister})
	case segs[0] == "apps" && len(segs) == 3:
		r.app, r.id = strings.ToUpper(segs[1]), segs[2]
		return methods(map[string]string{http.MethodGet: OpInstance, http.MethodPut: OpRenew, http.MethodDelete: OpCancel})
	case segs[0] == "apps" && len(segs) == 4 && segs[3] == "status":
		r.app, r.id = strings.ToUpper(segs[1]), segs[2]
		return methods(map[string]string{http.MethodPut: OpStatus, http.MethodDelete: OpStatusRemove})
	case segs[0] == "apps" && len(segs) == 4 && segs[3] == "metadata":
		r.app, r.id = strings.ToUpper(segs[1]), segs[2]
		return methods(map[string]string{http.MethodPut: OpMetadata})
	case segs[0] == "instances" && len(segs) == 2:
		r.id = segs[1]
		return methods(map[string]string{http.MethodGet: OpInstanceByID})
	case segs[0] == "vips" && len(segs) == 2:
		r.vip = segs[1]
		return methods(map[string]string{http.MethodGet: OpVIP})
	case segs[0] == "svips" && len(segs) == 2:
		r.vip = segs[1]
		return methods(map[string]string{http.MethodGet: OpSVIP})
	}
	return route{}, &routeError{http.StatusNotFound, ReasonUnknownRoute, "no such route of Eureka's API: " + u.Path}
}
