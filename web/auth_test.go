package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// fetch does one request without following redirects; header is
// name, value pairs.
func fetch(t *testing.T, method, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestStatusRoutesNeedTheKey: with api.key set, the status page, its
// files, /status.json and /metrics answer 401 without the key, unless
// api.public opens them; /health stays open.
func TestStatusRoutesNeedTheKey(t *testing.T) {
	const key = "s3cret"
	page := []string{"/", "/static/app.js", "/static/style.css", "/status.json"}
	for _, tc := range []struct {
		name       string
		apiKey     string
		public     []string
		openPage   bool
		openMetric bool
	}{
		{"no key configured", "", nil, true, true},
		{"key, nothing public", key, nil, false, false},
		{"key, status public", key, []string{PublicStatus}, true, false},
		{"key, metrics public", key, []string{PublicMetrics}, false, true},
		{"key, both public", key, []string{PublicMetrics, PublicStatus}, true, true},
	} {
		ts, _ := scriptServer(t, Options{APIKey: tc.apiKey, Public: tc.public, Status: newFakeStatus(t)}, "Hello.")
		check := func(path string, open bool) {
			t.Helper()
			resp, body := fetch(t, http.MethodGet, ts.URL+path)
			switch {
			case open && resp.StatusCode != http.StatusOK:
				t.Errorf("%s: GET %s without the key: %d, want 200", tc.name, path, resp.StatusCode)
			case !open && (resp.StatusCode != http.StatusUnauthorized || errorCode(t, body) != "invalid_api_key"):
				t.Errorf("%s: GET %s without the key: %d %s, want 401", tc.name, path, resp.StatusCode, body)
			}
			if resp, _ := fetch(t, http.MethodGet, ts.URL+path, "Authorization", "Bearer "+key); resp.StatusCode != http.StatusOK {
				t.Errorf("%s: GET %s with the bearer key: %d", tc.name, path, resp.StatusCode)
			}
		}
		for _, p := range page {
			check(p, tc.openPage)
		}
		check("/metrics", tc.openMetric)
		check("/health", true)
		check("/v1/models", tc.apiKey == "")
	}
	if _, err := newServer(Options{ModelName: "m", Public: []string{"status", "admin"}}, qwen3Tokenizer(t), 64, nil); err == nil ||
		!strings.Contains(err.Error(), `"admin"`) {
		t.Errorf("an unknown public group: %v", err)
	}
}

// TestStatusPageKeyInTheAddress: a browser cannot send a bearer header on
// a page load, so /?key=KEY sets a cookie and redirects to / without the
// key; the cookie then opens the page's routes (its fetch of
// /status.json), never the API or /metrics. ?key= also works on
// /status.json itself, for scripts.
func TestStatusPageKeyInTheAddress(t *testing.T) {
	const key = "s3cret"
	ts, _ := scriptServer(t, Options{APIKey: key, Status: newFakeStatus(t)}, "Hello.")
	if resp, _ := fetch(t, http.MethodGet, ts.URL+"/?key=wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/?key=wrong: %d", resp.StatusCode)
	}
	resp, _ := fetch(t, http.MethodGet, ts.URL+"/?key="+key)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("/?key=: %d to %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == statusCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" ||
		strings.Contains(cookie.Value, key) {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, and not the key itself", cookie)
	}
	withCookie := []string{"Cookie", cookie.String()}
	for path, want := range map[string]int{
		"/": 200, "/static/app.js": 200, "/status.json": 200,
		"/metrics": 401, "/v1/models": 401,
	} {
		if resp, _ := fetch(t, http.MethodGet, ts.URL+path, withCookie...); resp.StatusCode != want {
			t.Errorf("GET %s with the cookie: %d, want %d", path, resp.StatusCode, want)
		}
	}
	if resp, _ := fetch(t, http.MethodGet, ts.URL+"/", "Cookie", statusCookie+"=forged"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a forged cookie: %d", resp.StatusCode)
	}
	if resp, _ := fetch(t, http.MethodGet, ts.URL+"/status.json?key="+key); resp.StatusCode != http.StatusOK {
		t.Errorf("/status.json?key=: %d", resp.StatusCode)
	}
	// The official client still works with the key, and not without.
	c := ts.client(option.WithAPIKey(key))
	if _, err := c.Chat.Completions.New(context.Background(), userChat("hi")); err != nil {
		t.Errorf("official client with the key: %v", err)
	}
	var ae *openai.Error
	wrong := ts.client(option.WithAPIKey("wrong"))
	if _, err := wrong.Models.List(context.Background()); !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Errorf("official client with a wrong key: %v", err)
	}
}
