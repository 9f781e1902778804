package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/edgellmd/edgellmd/power"
)

// thorRoot is power's fake AGX Thor tree, made from a real board's files
// (power/testdata/README.md).
const thorRoot = "../power/testdata/root/thor-agx"

// fakeStatus is a StatusSource over the Thor tree, pinned to MAXN.
type fakeStatus struct {
	t      *testing.T
	board  power.Board
	reload *Reload
}

func newFakeStatus(t *testing.T) *fakeStatus {
	b, err := power.Detect(thorRoot)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeStatus{t: t, board: b, reload: &Reload{At: time.Now().Add(-time.Minute),
		Err: "/etc/edgellmd/edgellmd.yaml:7: draft.top_k: must be at least 1, got 0"}}
}

func (f *fakeStatus) Power() (power.Status, bool) {
	maxn := &power.PowerMode{ID: 0, Name: "MAXN"}
	return power.Status{Jetson: true, Model: f.board.Model, SoC: f.board.SoC, Family: f.board.Family, L4T: f.board.L4T,
		Mode: maxn, PinnedMode: "MAXN", Target: maxn, Pinned: true, Drifts: 1, Repins: 1, LastCheck: time.Now()}, true
}

func (f *fakeStatus) Telemetry(context.Context) power.Readings { return power.Telemetry(thorRoot) }

func (f *fakeStatus) Settings() Settings {
	return Settings{
		Draft:      DraftSettings{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}},
		Cache:      CacheSettings{Dir: "/var/lib/edgellmd/cache", MaxBytes: 2 << 30, MaxDiskBytes: 8 << 30, Persist: true},
		LastReload: f.reload,
	}
}

// statusServer is a real server over stories260K with the Thor status
// source, after a few real requests: three completions (one streamed), a
// chat completion and one bad request.
func statusServer(t *testing.T) (ts *testServer, promptTokens, outputTokens int) {
	t.Helper()
	st, err := os.Stat(storiesPath)
	if err != nil {
		t.Fatal(err)
	}
	ts = storiesServer(t, 4, Options{ModelName: "stories260K", Status: newFakeStatus(t),
		Model: ModelInfo{Path: storiesPath, Arch: "llama", Quantization: "F32", FileBytes: st.Size(), MappedBytes: st.Size()}})
	for _, body := range []string{
		`{"prompt":"Once upon a time","max_tokens":12}`,
		`{"prompt":"The cat","max_tokens":8,"temperature":0}`,
		`{"prompt":"Lily went","max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`,
	} {
		code, _, data := post(t, ts.URL+"/v1/completions", body)
		if code != http.StatusOK {
			t.Fatalf("completion: %d %s", code, data)
		}
		var u struct {
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if strings.Contains(body, `"stream":true`) {
			ev := sseEvents(t, data)
			if err := json.Unmarshal([]byte(ev[len(ev)-2]), &u); err != nil { // the usage chunk, before [DONE]
				t.Fatal(err)
			}
		} else if err := json.Unmarshal(data, &u); err != nil {
			t.Fatal(err)
		}
		promptTokens += u.Usage.PromptTokens
		outputTokens += u.Usage.CompletionTokens
	}
	if code, _, _ := post(t, ts.URL+"/v1/chat/completions", `{"messages":[]}`); code != http.StatusBadRequest {
		t.Fatalf("empty messages: status %d, want 400", code)
	}
	if resp, err := http.Get(ts.URL + "/wp-login.php"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown path: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	return ts, promptTokens, outputTokens
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, data)
	}
	return data
}

// The names, and the ones this package adds.
var metricNames = []string{
	"edgellmd_time_to_first_token_seconds",
	"edgellmd_time_per_output_token_seconds",
	"edgellmd_e2e_request_latency_seconds",
	"edgellmd_prompt_tokens_total",
	"edgellmd_generation_tokens_total",
	"edgellmd_prefix_cache_queries_total",
	"edgellmd_prefix_cache_hits_total",
	"edgellmd_spec_decode_num_draft_tokens_total",
	"edgellmd_spec_decode_num_accepted_tokens_total",
	"edgellmd_num_requests_running",
	"edgellmd_num_requests_waiting",
	"edgellmd_power_mode_info",
	"edgellmd_power_mode_pinned",
	"edgellmd_spec_decode_config",
	"edgellmd_temperature_celsius",
	"edgellmd_power_rail_watts",
	"edgellmd_gpu_frequency_hertz",
	"edgellmd_memory_used_bytes",
	"edgellmd_request_success_total",
	"edgellmd_device_info",
	"edgellmd_max_sequences",
	"edgellmd_forward_passes_total",
	"edgellmd_batch_sequences",
	"edgellmd_prefill_chunks_total",
	"go_goroutines",
	"go_memstats_heap_alloc_bytes",
	"process_resident_memory_bytes",
	"process_cpu_seconds_total",
}

func TestMetricsAfterRequests(t *testing.T) {
	ts, promptTokens, outputTokens := statusServer(t)
	if promptTokens == 0 || outputTokens == 0 {
		t.Fatalf("usage: prompt %d, output %d", promptTokens, outputTokens)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(get(t, ts.URL+"/metrics"))))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	for _, name := range metricNames {
		if fams[name] == nil || len(fams[name].Metric) == 0 {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s", name)
		}
	next:
		for _, m := range f.Metric {
			for k, v := range labels {
				if labelOf(m, k) != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"edgellmd_prompt_tokens_total", nil, float64(promptTokens)},
		{"edgellmd_generation_tokens_total", nil, float64(outputTokens)},
		{"edgellmd_time_to_first_token_seconds", nil, 3}, // sample counts
		{"edgellmd_time_per_output_token_seconds", nil, 3},
		{"edgellmd_e2e_request_latency_seconds", nil, 3},
		{"edgellmd_request_success_total", map[string]string{"finished_reason": "length"}, 3},
		{"edgellmd_prefix_cache_queries_total", nil, float64(promptTokens)}, // the cache is off: none hit
		{"edgellmd_prefix_cache_hits_total", nil, 0},
		{"edgellmd_spec_decode_num_draft_tokens_total", nil, 0},
		{"edgellmd_num_requests_running", nil, 0},
		{"edgellmd_num_requests_waiting", nil, 0},
		{"edgellmd_power_mode_info", map[string]string{"name": "MAXN", "id": "0"}, 1},
		{"edgellmd_power_mode_pinned", nil, 1},
		{"edgellmd_spec_decode_config", map[string]string{"mode": "tree", "steps": "8", "top_k": "2", "verify_nodes": "16", "drafters": "mtp,suffix"}, 1},
		{"edgellmd_config_last_reload_successful", nil, 0}, // the fake's last reload was refused
		{"edgellmd_config_restart_required", nil, 0},
		// From the Thor tree: thermal_zone0/temp holds 59218, hwmon1's
		// VDD_GPU 5040 mV at 1021 mA.
		{"edgellmd_temperature_celsius", map[string]string{"zone": "thermal_zone0", "type": "cpu-thermal"}, 59.218},
		{"edgellmd_power_rail_watts", map[string]string{"rail": "VDD_GPU"}, 5.14584},
		{"edgellmd_gpu_frequency_hertz", map[string]string{"device": "gpu-gpc-0"}, 1.575e9},
		// The test engine runs on the CPU.
		{"edgellmd_device_info", map[string]string{"engine": "cpu", "name": ts.eng.Device().Name, "driver": ""}, 1},
	} {
		if got := value(c.name, c.labels); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if m := fams["edgellmd_prompt_tokens_total"].Metric[0]; labelOf(m, "model_name") != "stories260K" {
		t.Errorf("model_name label = %q", labelOf(m, "model_name"))
	}
	// Device memory is a GPU's; the CPU engine has none to report.
	if fams["edgellmd_device_memory_used_bytes"] != nil || fams["edgellmd_device_memory_total_bytes"] != nil {
		t.Errorf("device memory series on the CPU engine")
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestMetricsRegistryPerServer: two servers count apart (no global registry).
func TestMetricsRegistryPerServer(t *testing.T) {
	a, _, _ := statusServer(t)
	b := storiesServer(t, 1, Options{ModelName: "other"})
	body := string(get(t, b.URL+"/metrics"))
	if !strings.Contains(body, `edgellmd_generation_tokens_total{model_name="other"} 0`) {
		t.Errorf("a fresh server's counter is not 0:\n%s", grepLines(body, "generation_tokens"))
	}
	// Without a status source the power series are there, empty.
	if !strings.Contains(body, `edgellmd_power_mode_pinned 0`) || !strings.Contains(body, `edgellmd_power_mode_info{id="",name=""} 0`) {
		t.Errorf("power series missing without a status source:\n%s", grepLines(body, "power_mode"))
	}
	if strings.Contains(string(get(t, a.URL+"/metrics")), `generation_tokens_total{model_name="stories260K"} 0`) {
		t.Error("the first server's counter is 0")
	}
	// Nor is /status.json short of anything but the source's parts.
	var doc map[string]any
	if err := json.Unmarshal(get(t, b.URL+"/status.json"), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["power"] != nil || doc["machine"] != nil || doc["model"] == nil || doc["requests"] == nil || doc["cache"] == nil {
		t.Errorf("status.json without a status source: %v", doc)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestStatusJSON(t *testing.T) {
	ts, _, outputTokens := statusServer(t)
	var doc struct {
		Ready bool `json:"ready"`
		Power *struct {
			Mode   struct{ Name string } `json:"mode"`
			Pinned bool                  `json:"pinned"`
			Drifts int                   `json:"drifts"`
			Model  string                `json:"model"`
		} `json:"power"`
		Machine *struct {
			Thermal []struct{ Celsius float64 } `json:"thermal"`
			GPU     struct {
				CurHz int64 `json:"cur_hz"`
			} `json:"gpu"`
		} `json:"machine"`
		Model struct {
			Name          string `json:"name"`
			Path          string `json:"path"`
			Arch          string `json:"arch"`
			Quantization  string `json:"quantization"`
			FileBytes     int64  `json:"file_bytes"`
			MappedBytes   int64  `json:"mapped_bytes"`
			ContextLength int    `json:"context_length"`
		} `json:"model"`
		Device *struct {
			Engine           string `json:"engine"`
			Selector         string `json:"selector"`
			Name             string `json:"name"`
			Driver           string `json:"driver"`
			MemoryTotalBytes *int64 `json:"memory_total_bytes"`
			MemoryUsedBytes  *int64 `json:"memory_used_bytes"`
		} `json:"device"`
		Cache struct {
			Entries  *int64   `json:"entries"`
			HitRatio *float64 `json:"hit_ratio"`
			MaxBytes int64    `json:"max_bytes"`
		} `json:"cache"`
		Speculative struct {
			Mode        string `json:"mode"`
			VerifyNodes int    `json:"verify_nodes"`
			LastReload  *struct {
				Error string `json:"error"`
			} `json:"last_reload"`
		} `json:"speculative"`
		Requests struct {
			Running, Waiting int
			Total, Failed    int64
			Finished         int
			TTFTP50ms        float64 `json:"ttft_p50_ms"`
			TTFTP90ms        float64 `json:"ttft_p90_ms"`
			TPOTP50ms        float64 `json:"tpot_p50_ms"`
			TokensPerSecond  float64 `json:"tokens_per_second"`
			SeriesStep       float64 `json:"series_step_seconds"`
			Series           []struct {
				Requests        int     `json:"requests"`
				TokensPerSecond float64 `json:"tokens_per_second"`
			} `json:"series"`
		} `json:"requests"`
		Errors []struct {
			Status  int    `json:"status"`
			Path    string `json:"path"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(get(t, ts.URL+"/status.json"), &doc); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(storiesPath)
	r := doc.Requests
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"ready", doc.Ready},
		{"power mode MAXN, pinned", doc.Power != nil && doc.Power.Mode.Name == "MAXN" && doc.Power.Pinned && doc.Power.Drifts == 1},
		{"board model", doc.Power != nil && strings.Contains(doc.Power.Model, "Thor")},
		{"thermal and GPU", doc.Machine != nil && len(doc.Machine.Thermal) > 0 && doc.Machine.GPU.CurHz == 1575000000},
		{"model", doc.Model.Name == "stories260K" && doc.Model.Arch == "llama" && doc.Model.Quantization == "F32" &&
			doc.Model.FileBytes == st.Size() && doc.Model.MappedBytes == st.Size() && doc.Model.ContextLength > 0 && doc.Model.Path == storiesPath},
		{"device: the CPU", doc.Device != nil && doc.Device.Engine == "cpu" && doc.Device.Selector == "cpu" &&
			doc.Device.Name != "" && doc.Device.Name == ts.eng.Device().Name && doc.Device.Driver == "" &&
			doc.Device.MemoryTotalBytes != nil && *doc.Device.MemoryTotalBytes == 0 && doc.Device.MemoryUsedBytes != nil},
		{"cache zeros present", doc.Cache.Entries != nil && *doc.Cache.Entries == 0 && doc.Cache.HitRatio != nil && doc.Cache.MaxBytes == 2<<30},
		{"speculative", doc.Speculative.Mode == "tree" && doc.Speculative.VerifyNodes == 16 &&
			doc.Speculative.LastReload != nil && strings.Contains(doc.Speculative.LastReload.Error, "draft.top_k")},
		{"requests counted", r.Total == 4 && r.Failed == 1 && r.Finished == 3 && r.Running == 0 && r.Waiting == 0},
		{"percentiles", r.TTFTP50ms > 0 && r.TTFTP90ms >= r.TTFTP50ms && r.TPOTP50ms > 0},
		{"tokens/s", r.TokensPerSecond > 0},
		{"errors", len(doc.Errors) == 1 && doc.Errors[0].Status == 400 && doc.Errors[0].Path == "/v1/chat/completions" &&
			strings.Contains(doc.Errors[0].Message, "messages")},
	} {
		if !c.ok {
			t.Errorf("status.json: %s wrong: %+v", c.what, doc)
		}
	}
	sum, n := 0.0, 0
	for _, p := range r.Series {
		sum += p.TokensPerSecond * r.SeriesStep
		n += p.Requests
	}
	if n != 3 || int(sum+0.5) != outputTokens {
		t.Errorf("series hold %d requests and %.1f tokens, want 3 and %d", n, sum, outputTokens)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	for _, c := range []struct {
		in   []time.Duration
		p    int
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 90, 7 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 50, 3 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 90, 5 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
	} {
		if got := percentile(c.in, c.p); got != c.want {
			t.Errorf("percentile(%v, %d) = %v, want %v", c.in, c.p, got, c.want)
		}
	}
}

// TestStatusPageInChromium loads / in headless Chromium from Debian and
// checks the DOM the page's script rendered from /status.json.
func TestStatusPageInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	ts, promptTokens, _ := statusServer(t)
	out := t.ArtifactDir()
	run := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		// The flags keep Chromium off the network it cannot reach here
		// (/work/.library/env/machines/go.md), with a fresh profile.
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}
		cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
		}
		return b
	}
	dom := string(run("--dump-dom", ts.URL+"/"))
	if err := os.WriteFile(filepath.Join(out, "status-dom.html"), []byte(dom), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`data-loaded="1"`, // the script fetched and rendered /status.json
		`id="conn" class="pill good">live<`,
		`id="power-mode" class="">MAXN (id 0)<`,
		`id="power-pinned" class="good">yes: MAXN<`,
		`NVIDIA Jetson AGX Thor`,
		`id="dev-engine" class="">CPU<`,
		`id="dev-sel" class="">model.device: cpu<`,
		`id="model-name" class="">stories260K<`,
		`id="model-arch" class="">llama<`,
		`id="model-quant" class="">F32<`,
		`id="model-size" class="">1.13 MiB`,
		`id="cache-entries" class="">0 (off: cache.max_bytes is 0)<`,
		`id="cache-ram" class="">0 B of 2.00 GiB<`,
		fmt.Sprintf(`id="cache-hit" class="">0.0%% (0 of %d tokens)<`, promptTokens),
		`id="spec-params" class="">steps 8 · top-k 2 · verify 16 nodes · mtp, suffix<`,
		`draft.top_k: must be at least 1`,
		`id="req-total" class="warn">4 / 1<`,
		`class="line" d="M`, // a chart was drawn
		`/v1/chat/completions`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	for _, shot := range []struct {
		name string
		args []string
	}{
		{"desktop", []string{"--window-size=1280,1400"}},
		{"phone", []string{"--window-size=390,2400"}},
		{"phone-dark", []string{"--window-size=390,2400", "--force-dark-mode", "--blink-settings=preferredColorScheme=0"}},
	} {
		file := filepath.Join(out, "status-"+shot.name+".png")
		run(append(shot.args, "--screenshot="+file, "--hide-scrollbars", ts.URL+"/")...)
		if st, err := os.Stat(file); err != nil || st.Size() < 10000 {
			t.Errorf("screenshot %s: %v", file, err)
		}
	}
	t.Logf("DOM and screenshots in %s", out)
}

// TestStatusBookWindows: old requests leave the charts, the percentiles
// cover the last minutes and tokens/s the last minute.
func TestStatusBookWindows(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b := statusBook{since: now.Add(-time.Hour)}
	gen := func(ttftMs, outTokens int) *record {
		return &record{generation: true, finish: "stop", promptTokens: 10, outputTokens: outTokens,
			ttft: time.Duration(ttftMs) * time.Millisecond, tpot: time.Millisecond}
	}
	for _, c := range []struct {
		ago time.Duration
		rec *record
	}{
		{20 * time.Minute, gen(1000, 600)}, // outside every window
		{10 * time.Minute, gen(900, 600)},  // charts only
		{4 * time.Minute, gen(30, 600)},    // charts and percentiles
		{30 * time.Second, gen(10, 60)},    // and tokens/s
		{20 * time.Second, gen(20, 60)},
	} {
		b.observe(now.Add(-c.ago), "id", "POST", "/v1/completions", c.rec, 200, time.Second)
	}
	rs, errs, _ := b.snapshot(now)
	if len(b.requests) != 4 || len(errs) != 0 {
		t.Fatalf("kept %d requests, %d errors; want 4, 0", len(b.requests), len(errs))
	}
	if rs.Finished != 3 || rs.TTFTP50ms != 20 || rs.TTFTP90ms != 30 || rs.TokensPerSecond != 2 || rs.Total != 5 {
		t.Errorf("figures %+v", rs)
	}
	n := 0
	for _, p := range rs.Series {
		n += p.Requests
	}
	if n != 4 || len(rs.Series) != int(statusWindow/seriesStep) || !rs.Series[len(rs.Series)-1].Time.Equal(now) {
		t.Errorf("series: %d requests in %d points ending %v", n, len(rs.Series), rs.Series[len(rs.Series)-1].Time)
	}
}

func TestClientText(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain text", 100, "plain text"},
		{"<img src=x onerror=alert(1)>", 100, "<img src=x onerror=alert(1)>"}, // JSON escapes it, the page sets it as text
		{"tab\there\nnew", 100, `tab\there\nnew`},
		{"bidi \u202eevil", 100, `bidi \u202eevil`},
		{"nul \x00 del \x7f", 100, `nul \x00 del \x7f`},
		{"bad \xff utf-8", 100, `bad \xff utf-8`},
		{"日本語 ✓", 100, "日本語 ✓"},
		{strings.Repeat("a", 10), 10, strings.Repeat("a", 10)},
		{strings.Repeat("a", 11), 10, strings.Repeat("a", 7) + "…"},
		{strings.Repeat("é", 6), 10, strings.Repeat("é", 3) + "…"}, // cut at a character boundary
		{"abcd\x01efgh", 10, "abcd…"},                              // and never inside an escape
		{"abcdef", 2, "ab"},
	} {
		if got := clientText(c.in, c.max); got != c.want {
			t.Errorf("clientText(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

// TestStatusErrorsShortenedAndEscaped: what a client wrote into an error
// (here a model name) reaches /status.json cut to maxErrorText bytes, with
// control and bidi characters escaped.
func TestStatusErrorsShortenedAndEscaped(t *testing.T) {
	ts, _ := scriptServer(t, Options{}, "Hello.")
	model := "<script>alert(1)</script>\u202e\x01" + strings.Repeat("A", 100000)
	name, _ := json.Marshal(model)
	if status, _, body := post(t, ts.URL+"/v1/completions", `{"model":`+string(name)+`,"prompt":"x"}`); status != http.StatusNotFound {
		t.Fatalf("unknown model: %d %s", status, body)
	}
	var doc struct {
		Errors []errorEntry `json:"errors"`
	}
	if err := json.Unmarshal(get(t, ts.URL+"/status.json"), &doc); err != nil || len(doc.Errors) != 1 {
		t.Fatalf("errors %+v: %v", doc.Errors, err)
	}
	msg := doc.Errors[0].Message
	if len(msg) > maxErrorText || !strings.HasSuffix(msg, "…") || !strings.Contains(msg, "<script>alert(1)</script>\\u202e\\x01AAA") ||
		strings.ContainsAny(msg, "\u202e\x01") {
		t.Errorf("message (%d bytes) %q", len(msg), msg)
	}
}

// TestStatusPageWithKeyInChromium: with api.key set, the page opened as
// /?key=KEY renders (its fetch of /status.json carries the cookie), shows
// a client's markup in an error as text, and without the key says how to
// give it.
func TestStatusPageWithKeyInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	const key = "s3cret"
	ts, _ := scriptServer(t, Options{APIKey: key, Status: newFakeStatus(t)}, "Hello.")
	evil := `<img src=x onerror="document.body.dataset.pwned=1">` + strings.Repeat("B", 500)
	name, _ := json.Marshal(evil)
	if status, _, body := post(t, ts.URL+"/v1/completions", `{"model":`+string(name)+`,"prompt":"x"}`, "Authorization", "Bearer "+key); status != http.StatusNotFound {
		t.Fatalf("unknown model: %d %s", status, body)
	}
	dump := func(url string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", url)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
		}
		return string(b)
	}
	dom := dump(ts.URL + "/?key=" + key)
	for _, want := range []string{
		`data-loaded="1"`,
		`id="conn" class="pill good">live<`,
		`id="power-mode" class="">MAXN (id 0)<`,
		`&lt;img src=x onerror="document.body.dataset.pwned=1"&gt;BBB`, // the model name, as text
		`B…`, // cut
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	if strings.Contains(dom, "pwned") && strings.Contains(dom, `data-pwned`) {
		t.Error("a client's markup ran in the page")
	}
	if dom := dump(ts.URL + "/"); !strings.Contains(dom, "invalid_api_key") || !strings.Contains(dom, "/?key=KEY") {
		t.Errorf("without the key the page should say how to give it:\n%s", dom)
	}
}
