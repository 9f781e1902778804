package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Who may call what. With no API key every route is open. With one,
// /health stays open (load balancers, systemd's checks); the API routes,
// /metrics and /admin/update need "Authorization: Bearer KEY"; the status
// page (/, /static/, /status.json) takes the key also as ?key=KEY or as the
// cookie a ?key= visit sets, because a browser cannot add a header to a
// page load. Options.Public opens the status page or /metrics to anyone.

// Route groups that Options.Public may open without the API key.
const (
	PublicStatus  = "status"  // the status page, its static files and /status.json
	PublicMetrics = "metrics" // /metrics
)

// statusCookie holds a value derived from the key (never the key itself)
// and opens the status page's routes only: it is HttpOnly and SameSite, but
// a cookie is shared by every port of the host, so it must not open the API.
const statusCookie = "edgellmd_status"

// keyCheck compares presented keys with the configured one. Both sides are
// hashed first, so the comparison takes the same time whatever the lengths.
type keyCheck struct {
	set    bool
	hash   [32]byte
	cookie string // the status page cookie's value: HMAC-SHA256(key, purpose), hex
}

func newKeyCheck(key string) keyCheck {
	if key == "" {
		return keyCheck{}
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte("edgellmd status page cookie"))
	return keyCheck{set: true, hash: sha256.Sum256([]byte(key)), cookie: hex.EncodeToString(mac.Sum(nil))}
}

// matches reports whether token is the key, in constant time.
func (k keyCheck) matches(token string) bool {
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], k.hash[:]) == 1
}

// presented reports whether r carries the key, as "Authorization: Bearer
// KEY" or as "X-Api-Key: KEY". Both are compared whatever the first gives,
// so that the time taken says nothing about which one matched.
func (k keyCheck) presented(r *http.Request) bool {
	// The scheme is case-insensitive (RFC 9110 section 11.1): "bearer" too.
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	bearer := k.matches(strings.TrimSpace(token)) && ok
	xKey := r.Header.Get("X-Api-Key")
	header := k.matches(strings.TrimSpace(xKey)) && xKey != ""
	return bearer || header
}

// hasCookie reports whether r carries the status page's cookie.
func (k keyCheck) hasCookie(r *http.Request) bool {
	c, err := r.Cookie(statusCookie)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(k.cookie)) == 1
}

func unauthorized(how string) *apiError {
	return &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key",
		Message: "missing or incorrect API key: " + how}
}

// headerKeyOnly passes requests with the key in a header to h and answers
// the others 401, from the headers alone: the body is never read for them.
func headerKeyOnly(k keyCheck, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !k.presented(r) {
			writeError(w, r, unauthorized("send it as \"Authorization: Bearer KEY\" or \"X-Api-Key: KEY\""))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// requireKey guards an API route (and /metrics) when a key is configured.
func (s *Server) requireKey(h http.Handler) http.Handler {
	if !s.key.set {
		return h
	}
	return headerKeyOnly(s.key, h)
}

// requirePageKey guards the status page's routes when a key is configured
// and PublicStatus is not given. A valid ?key= on the page itself sets the
// cookie and redirects to the same address without the key, so that it
// leaves the address bar; the page's own requests then carry the cookie.
func (s *Server) requirePageKey(h http.Handler) http.Handler {
	if !s.key.set || slices.Contains(s.opt.Public, PublicStatus) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Has("key") {
			if !s.key.matches(q.Get("key")) {
				writeError(w, r, unauthorized("the key= in the address is not the server's api.key"))
				return
			}
			if r.URL.Path == "/" {
				http.SetCookie(w, &http.Cookie{Name: statusCookie, Value: s.key.cookie, Path: "/",
					HttpOnly: true, SameSite: http.SameSiteStrictMode})
				q.Del("key")
				to := (&url.URL{Path: "/", RawQuery: q.Encode()}).String()
				http.Redirect(w, r, to, http.StatusSeeOther)
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		if !s.key.presented(r) && !s.key.hasCookie(r) {
			writeError(w, r, unauthorized("open the status page as /?key=KEY (that sets a cookie for it), or send \"Authorization: Bearer KEY\" or \"X-Api-Key: KEY\""))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// requireMetricsKey guards /metrics when a key is configured and
// PublicMetrics is not given; Prometheus sends the key as a bearer token
// (scrape_configs: authorization: credentials: KEY).
func (s *Server) requireMetricsKey(h http.Handler) http.Handler {
	if slices.Contains(s.opt.Public, PublicMetrics) {
		return h
	}
	return s.requireKey(h)
}

// checkPublic refuses route groups that Options.Public does not know.
func checkPublic(public []string) error {
	for _, p := range public {
		if p != PublicStatus && p != PublicMetrics {
			return fmt.Errorf("web: Options.Public: %q is not %s or %s", p, PublicMetrics, PublicStatus)
		}
	}
	return nil
}
