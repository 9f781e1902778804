package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Cross-origin calls from browsers (CORS, the Fetch standard's "CORS
// protocol"). With no origins configured, nothing changes for a browser: a
// preflight is answered 204 without allow headers, so a page of another
// origin can read no answer and send no JSON (the routes refuse bodies that
// are not application/json, which a page can only send after a preflight).
// A configured origin gets the allow headers on preflights and
// Access-Control-Allow-Origin on every answer of the API routes, errors
// included, so that its script can read them. Credentials (cookies) are
// never allowed: the API key travels in a header, which CORS counts as an
// ordinary request header, and the status page's cookie is not for the API.

// Headers a preflight always allows: the key's two forms and the JSON body's
// media type, and the ids the log line reads.
var corsAllowHeaders = []string{"Authorization", "Content-Type", "X-Api-Key", requestIDHeader, "X-Session-ID", sessionKeyHeader}

// corsExposeHeaders are the response headers a page's script may read
// beside the safelisted ones: the OpenAI SDKs read the first two; a page
// may send the affinity key back (session.go).
const corsExposeHeaders = requestIDHeader + ", Retry-After, " + sessionKeyHeader

// corsMaxAgeSeconds is how long a browser may reuse a preflight's answer:
// Chromium's cap. The allowed origins change only with a restart.
const corsMaxAgeSeconds = "7200"

// Bounds on what a preflight's Access-Control-Request-Headers may ask for.
const (
	maxRequestedHeaders  = 64
	maxHeaderNameBytes   = 128
	maxRequestHeaderList = 4096
)

// corsPolicy says which origins' pages may call the API routes.
type corsPolicy struct {
	any     bool            // "*": every origin
	origins map[string]bool // serialized origins, as normalOrigin writes them
}

// newCORSPolicy checks the configured origins: "*", or scheme://host with an
// optional port and nothing after it.
func newCORSPolicy(origins []string) (corsPolicy, error) {
	p := corsPolicy{origins: map[string]bool{}}
	for i, o := range origins {
		if o == "*" {
			p.any = true
			continue
		}
		n, err := normalOrigin(o)
		if err != nil {
			return corsPolicy{}, fmt.Errorf("web: Options.CORSOrigins[%d]: %w", i, err)
		}
		p.origins[n] = true
	}
	return p, nil
}

// CheckCORSOrigin says what is wrong with an allowed-origin setting ("*",
// or scheme://host[:port]); nil when nothing is.
func CheckCORSOrigin(origin string) error {
	if origin == "*" {
		return nil
	}
	_, err := normalOrigin(origin)
	return err
}

// normalOrigin serializes an origin as browsers send it in the Origin
// header: scheme and host in lower case, the scheme's default port left out.
func normalOrigin(s string) (string, error) {
	bad := fmt.Errorf("%q is not an origin: want scheme://host[:port] with nothing after it (e.g. https://app.example.com or http://localhost:3000), or \"*\" for any origin", s)
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#") {
		return "", bad
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if host == "" || strings.HasSuffix(u.Host, ":") {
		return "", bad
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// allowOrigin is the Access-Control-Allow-Origin value for a request's
// Origin header, and whether the origin is allowed.
func (p corsPolicy) allowOrigin(origin string) (string, bool) {
	if origin == "" || origin == "null" {
		return "", false // no browser page, or an opaque one (a sandbox, a file)
	}
	if p.any {
		return "*", true
	}
	n, err := normalOrigin(origin)
	if err != nil || !p.origins[n] {
		return "", false
	}
	return origin, true
}

func (p corsPolicy) enabled() bool { return p.any || len(p.origins) > 0 }

// actual marks the answers of an API route for allowed origins.
func (p corsPolicy) actual(h http.Handler) http.Handler {
	if !p.enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		if !p.any {
			hdr.Add("Vary", "Origin") // the answer depends on it: caches must know
		}
		if allow, ok := p.allowOrigin(r.Header.Get("Origin")); ok {
			hdr.Set("Access-Control-Allow-Origin", allow)
			hdr.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		h.ServeHTTP(w, r)
	})
}

// preflight answers OPTIONS on an API route whose methods are given: 204,
// with the allow headers when the origin is allowed and the request is a
// preflight (it names the method it wants).
func (p corsPolicy) preflight(methods []string) http.Handler {
	allowMethods := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Allow", allowMethods+", "+http.MethodOptions)
		if p.enabled() {
			hdr.Add("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
		}
		allow, ok := p.allowOrigin(r.Header.Get("Origin"))
		if ok && r.Header.Get("Access-Control-Request-Method") != "" {
			hdr.Set("Access-Control-Allow-Origin", allow)
			hdr.Set("Access-Control-Allow-Methods", allowMethods)
			hdr.Set("Access-Control-Allow-Headers", strings.Join(allowedHeaders(r.Header.Values("Access-Control-Request-Headers")), ", "))
			hdr.Set("Access-Control-Max-Age", corsMaxAgeSeconds)
		}
		dropUnreadBody(w, r)
		w.WriteHeader(http.StatusNoContent)
	})
}

// allowedHeaders are corsAllowHeaders and the headers the preflight asks
// for: an allowed origin's page may send any well-formed header (the
// official SDKs send their own X-Stainless-* ones, which a fixed list would
// refuse); nothing here reads a header a page could abuse. A request list
// too long or with a malformed name gets the fixed list alone.
func allowedHeaders(requested []string) []string {
	out := slices.Clone(corsAllowHeaders)
	list := strings.Join(requested, ",")
	if len(list) > maxRequestHeaderList {
		return out
	}
	var extra []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if len(extra) == maxRequestedHeaders || !isHeaderName(name) {
			return out
		}
		if !slices.ContainsFunc(out, func(h string) bool { return strings.EqualFold(h, name) }) &&
			!slices.ContainsFunc(extra, func(h string) bool { return strings.EqualFold(h, name) }) {
			extra = append(extra, strings.ToLower(name))
		}
	}
	return append(out, extra...)
}

// isHeaderName reports whether s is an HTTP token (RFC 9110, 5.6.2).
func isHeaderName(s string) bool {
	if s == "" || len(s) > maxHeaderNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
