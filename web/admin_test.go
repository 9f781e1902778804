package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/update"
)

// stateUpdater is the daemon's Updater in miniature: update.Apply on a
// state directory, with a health check that fails for models named in fail.
type stateUpdater struct {
	dir   string
	keys  []update.TrustedKey
	calls atomic.Int32
	// read, when set, wraps the body (the streaming test watches it).
	read func(io.Reader) io.Reader
}

func (u *stateUpdater) Apply(ctx context.Context, body io.Reader, allowDowngrade bool) (update.Result, error) {
	u.calls.Add(1)
	if u.read != nil {
		body = u.read(body)
	}
	return update.Apply(ctx, body, update.Options{StateDir: u.dir, TrustedKeys: u.keys, AllowDowngrade: allowDowngrade,
		Platform: update.Platform{Arch: runtime.GOARCH}, ReserveBytes: -1, Log: zerolog.Nop(),
		Check: func(_ context.Context, modelPath string, hc update.HealthCheck) error {
			if hc.Prompt == "fail" {
				return errors.New("the model answers nonsense")
			}
			_, err := os.Stat(modelPath)
			return err
		}})
}

type adminFixture struct {
	url  string
	upd  *stateUpdater
	pack func(version, prompt string) []byte
}

func newAdminFixture(t *testing.T, apiKey string) *adminFixture {
	t.Helper()
	base := filepath.Join(t.TempDir(), "signer")
	if _, err := update.GenerateKeyFiles(base); err != nil {
		t.Fatal(err)
	}
	priv, err := update.LoadPrivateKey(base + ".key")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := update.LoadPublicKey(base + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	model := bytes.Repeat([]byte("model bytes "), 20000) // 240 kB: more than one read of the body
	if err := os.WriteFile(filepath.Join(src, "model.gguf"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	f := &adminFixture{upd: &stateUpdater{dir: t.TempDir(), keys: []update.TrustedKey{pub}}}
	f.pack = func(version, prompt string) []byte {
		var buf bytes.Buffer
		if _, err := update.Pack(&buf, src, update.PackOptions{Name: "m", Version: version,
			HealthCheck: update.HealthCheck{Prompt: prompt, Tokens: []int32{1}}}, priv); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	r := mux.NewRouter()
	RegisterAdmin(r, AdminOptions{APIKey: apiKey, Updater: f.upd, Log: zerolog.Nop()})
	srv := httptest.NewServer(r) // 127.0.0.1:0
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

type adminAnswer struct {
	Status int
	Body   updateResponse
	Raw    string
}

func postBundle(t *testing.T, url, key string, body io.Reader) adminAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-tar")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := adminAnswer{Status: resp.StatusCode, Raw: string(raw)}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("content type %q: %s", resp.Header.Get("Content-Type"), raw)
	}
	if err := json.Unmarshal(raw, &a.Body); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	return a
}

func TestAdminUpdateNeedsAPIKey(t *testing.T) {
	f := newAdminFixture(t, "")
	a := postBundle(t, f.url+"/admin/update", "anything", bytes.NewReader(f.pack("1.0.0", "ok")))
	if a.Status != http.StatusForbidden || a.Body.Error == nil || a.Body.Error.Type != "permission_error" ||
		!strings.Contains(a.Body.Error.Message, "api.key") || f.upd.calls.Load() != 0 {
		t.Fatalf("no key configured: %d %s (updater called %d times)", a.Status, a.Raw, f.upd.calls.Load())
	}

	f = newAdminFixture(t, "s3cret")
	for _, key := range []string{"", "wrong", "s3cret2"} {
		a := postBundle(t, f.url+"/admin/update", key, bytes.NewReader(f.pack("1.0.0", "ok")))
		if a.Status != http.StatusUnauthorized || a.Body.Error == nil || *a.Body.Error.Code != "invalid_api_key" {
			t.Fatalf("key %q: %d %s", key, a.Status, a.Raw)
		}
	}
	if f.upd.calls.Load() != 0 {
		t.Fatalf("updater called without a valid key")
	}
	resp, err := http.Get(f.url + "/admin/update")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}

func TestAdminUpdateOutcomes(t *testing.T) {
	f := newAdminFixture(t, "s3cret")
	post := func(query string, bundle []byte) adminAnswer {
		return postBundle(t, f.url+"/admin/update"+query, "s3cret", bytes.NewReader(bundle))
	}
	a := post("", f.pack("1.0.0", "ok"))
	if a.Status != http.StatusOK || !a.Body.Committed || a.Body.Version != "1.0.0" || a.Body.Error != nil || a.Body.Object != "admin.update" {
		t.Fatalf("good bundle: %d %s", a.Status, a.Raw)
	}
	if !strings.HasSuffix(a.Body.ModelPath, filepath.Join("bundles", "1.0.0", "model.gguf")) {
		t.Fatalf("model path %q", a.Body.ModelPath)
	}

	tampered := f.pack("2.0.0", "ok")
	tampered[len(tampered)-1024-5000] ^= 1 // inside model.gguf, the last entry
	cases := []struct {
		name   string
		query  string
		bundle []byte
		status int
		code   string
	}{
		{"flipped byte", "", tampered, http.StatusBadRequest, "invalid_bundle"},
		{"truncated", "", f.pack("2.0.0", "ok")[:100000], http.StatusBadRequest, "invalid_bundle"},
		{"not a tar", "", []byte("hello"), http.StatusBadRequest, "invalid_bundle"},
		{"downgrade", "", f.pack("0.9.0", "ok"), http.StatusConflict, "downgrade_refused"},
		{"same version", "", f.pack("1.0.0", "ok"), http.StatusConflict, "already_current"},
		{"bad query", "?allow_downgrade=maybe", f.pack("0.9.0", "ok"), http.StatusBadRequest, ""},
		{"health check fails", "", f.pack("2.0.0", "fail"), http.StatusUnprocessableEntity, "health_check_failed"},
	}
	for _, tc := range cases {
		a := post(tc.query, tc.bundle)
		if a.Status != tc.status || a.Body.Error == nil || a.Body.Committed {
			t.Fatalf("%s: %d %s", tc.name, a.Status, a.Raw)
		}
		if tc.code != "" && (a.Body.Error.Code == nil || *a.Body.Error.Code != tc.code) {
			t.Fatalf("%s: %s", tc.name, a.Raw)
		}
		if tc.name == "health check fails" && (!a.Body.RolledBack || a.Body.Current != "1.0.0" || !strings.Contains(a.Body.Error.Message, "rolled back to 1.0.0")) {
			t.Fatalf("%s: %s", tc.name, a.Raw)
		}
	}
	st, err := update.ReadStatus(f.upd.dir)
	if err != nil || st.Current.Version != "1.0.0" || len(st.Installed) != 1 {
		t.Fatalf("after refusals: %+v %v", st, err)
	}
	if a := post("?allow_downgrade=true", f.pack("0.9.0", "ok")); a.Status != http.StatusOK || a.Body.Previous != "1.0.0" {
		t.Fatalf("allowed downgrade: %d %s", a.Status, a.Raw)
	}
}

// TestAdminUpdateStreams: the updater starts on the bundle while the client
// is still sending it — the handler does not read the body whole first.
func TestAdminUpdateStreams(t *testing.T) {
	f := newAdminFixture(t, "s3cret")
	bundle := f.pack("1.0.0", "ok")
	half := len(bundle) / 2
	firstRead := make(chan struct{})
	f.upd.read = func(r io.Reader) io.Reader {
		return &notifyReader{r: r, first: firstRead}
	}
	pr, pw := io.Pipe()
	go func() {
		pw.Write(bundle[:half])
		// The rest is sent only once the updater has read from the body:
		// a handler that buffered the whole body would wait here forever.
		select {
		case <-firstRead:
			pw.Write(bundle[half:])
			pw.Close()
		case <-time.After(10 * time.Second):
			pw.CloseWithError(errors.New("the updater never read while the body was incomplete"))
		}
	}()
	a := postBundle(t, f.url+"/admin/update", "s3cret", pr)
	if a.Status != http.StatusOK || !a.Body.Committed {
		t.Fatalf("%d %s", a.Status, a.Raw)
	}
}

type notifyReader struct {
	r     io.Reader
	first chan struct{}
	done  bool
}

func (n *notifyReader) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if k > 0 && !n.done {
		n.done = true
		close(n.first)
	}
	return k, err
}

func TestAdminUpdateBodyLimit(t *testing.T) {
	f := newAdminFixture(t, "s3cret")
	r := mux.NewRouter()
	RegisterAdmin(r, AdminOptions{APIKey: "k", Updater: f.upd, MaxBundleBytes: 4096, Log: zerolog.Nop()})
	srv := httptest.NewServer(r)
	defer srv.Close()
	// Known length: refused before the updater runs.
	a := postBundle(t, srv.URL+"/admin/update", "k", bytes.NewReader(f.pack("1.0.0", "ok")))
	if a.Status != http.StatusRequestEntityTooLarge || f.upd.calls.Load() != 0 {
		t.Fatalf("%d %s", a.Status, a.Raw)
	}
	// Unknown length (chunked): cut off while streaming.
	a = postBundle(t, srv.URL+"/admin/update", "k", io.MultiReader(bytes.NewReader(f.pack("1.0.0", "ok"))))
	if a.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: %d %s", a.Status, a.Raw)
	}
	if st, _ := update.ReadStatus(f.upd.dir); st.Current != nil {
		t.Fatalf("installed past the limit: %+v", st.Current)
	}
}
