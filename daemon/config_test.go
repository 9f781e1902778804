package daemon

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/speculative"
)

func TestDefaultsWithEmptyOrCommentOnlyFile(t *testing.T) {
	for _, src := range []string{"", "# nothing\n", "---\n", "~\n", "draft:\n", "model: {}\n"} {
		cfg, err := ParseConfig("x.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if !reflect.DeepEqual(cfg, DefaultConfig()) {
			t.Fatalf("%q: got %+v, want the defaults", src, cfg)
		}
	}
}

func TestDefaultsAreValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// The packaged conffile spells out every default.
func TestPackagedConfigEqualsDefaults(t *testing.T) {
	path := "../packaging/edgellmd.yaml"
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, DefaultConfig()) {
		t.Fatalf("%s differs from DefaultConfig():\n got %+v\nwant %+v", path, cfg, DefaultConfig())
	}
	// And it names every key, so that it documents them all.
	data, _ := os.ReadFile(path)
	lines, err := decodeConfig(path, data, new(Config))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range allKeys() {
		if _, ok := lines[key]; !ok {
			t.Errorf("%s does not show key %s", path, key)
		}
	}
}

// allKeys lists every leaf key of Config.
func allKeys() []string { return configKeys() }

func TestEverySectionDecodes(t *testing.T) {
	src := `
listen: "0.0.0.0:9000"
model:
  path: /models/qwen.gguf
  name: qwen3.6-27b
  aliases: [gpt-4o-mini, Qwen/Qwen3.6-27B]
  context_length: 32768
  threads: 12
  kv_type: fp8
  activations: nvfp4
  device: gpu:1
  gpu_matmul: coopmat
engine:
  max_sequences: 8
  prefill_chunk: 512
  decode_slowdown: 3
  memory_budget: 8GiB
cache:
  dir: /srv/cache
  max_bytes: 12GiB
  max_disk_bytes: 100GB
  persist: false
draft:
  mode: tree
  steps: 6
  top_k: 8
  verify_nodes: 32
  drafters: [suffix]
power:
  pin: MAXN_SUPER
  jetson_clocks: true
  check_interval: 1m30s
  repin: false
api:
  key: s3cret-token
  public: [metrics]
  cors_origins: ["https://app.example.com", "*"]
  special_tokens_in_messages: true
  queue_depth: 4
  max_body_bytes: 1.5MiB
  body_timeout: 5s
  upload_timeout: 30m
  request_timeout: 2m
  drain_timeout: 0s
  max_connections: 32
  max_connections_per_client: 8
  responses_store_size: 10
  responses_store_ttl: 5m
update:
  state_dir: /srv/edgellmd
  trusted_dir: /srv/keys
  keep: 5
log:
  level: debug
  format: json
`
	want := Config{
		Listen: "0.0.0.0:9000",
		Model:  ModelConfig{Path: "/models/qwen.gguf", Name: "qwen3.6-27b", Aliases: []string{"gpt-4o-mini", "Qwen/Qwen3.6-27B"}, ContextLength: 32768, Threads: 12, KVType: "fp8", Activations: "nvfp4", Device: "gpu:1", GPUMatMul: "coopmat"},
		Engine: EngineConfig{MaxSequences: 8, PrefillChunk: 512, DecodeSlowdown: 3, MemoryBudget: 8 * GiB},
		Cache:  CacheConfig{Dir: "/srv/cache", MaxBytes: 12 * GiB, MaxDiskBytes: 100_000_000_000, Persist: false},
		Draft:  speculative.Config{Mode: "tree", Steps: 6, TopK: 8, VerifyNodes: 32, Drafters: []string{"suffix"}},
		Power:  PowerConfig{Pin: "MAXN_SUPER", JetsonClocks: true, CheckInterval: Duration(90 * time.Second), Repin: false},
		API: APIConfig{Key: "s3cret-token", Public: []string{"metrics"}, CORSOrigins: []string{"https://app.example.com", "*"}, SpecialTokensInMessages: true, QueueDepth: 4, MaxBodyBytes: 3 * MiB / 2,
			BodyTimeout: Duration(5 * time.Second), UploadTimeout: Duration(30 * time.Minute),
			RequestTimeout: Duration(2 * time.Minute), DrainTimeout: 0, MaxConnections: 32, MaxConnectionsPerClient: 8,
			ResponsesStoreSize: 10, ResponsesStoreTTL: Duration(5 * time.Minute)},
		Update: UpdateConfig{StateDir: "/srv/edgellmd", TrustedDir: "/srv/keys", Keep: 5},
		Log:    LogConfig{Level: "debug", Format: LogJSON},
	}
	got, err := ParseConfig("full.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	// Every key was changed from its default, so the test covers them all.
	if diff := configDiff(DefaultConfig(), want); len(diff) != len(allKeys()) {
		t.Fatalf("test sets %d keys, config has %d: %v", len(diff), len(allKeys()), diff)
	}
}

func TestPartialSectionKeepsOtherDefaults(t *testing.T) {
	cfg, err := ParseConfig("p.yaml", []byte("draft:\n  mode: tree\napi:\n  key: k\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Draft.Mode = "tree"
	want.API.Key = "k"
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v", cfg)
	}
}

// Every bad value is an error naming its key, its line and what is allowed.
func TestBadValuesNameTheKey(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string // substrings of the error
	}{
		{"unknown top-level key", "listen: :1\nmodels:\n  path: x\n", []string{"b.yaml:2: models: unknown key (did you mean model?)", "the top level has listen, model, engine, cache"}},
		{"unknown nested key", "cache:\n  dir: /x\n  max_byte: 1GiB\n", []string{"b.yaml:3: cache.max_byte: unknown key (did you mean max_bytes?)", "cache has dir, max_bytes, max_disk_bytes, persist"}},
		{"unknown key far from all", "api:\n  zzzzzz: 1\n", []string{"b.yaml:2: api.zzzzzz: unknown key; api has key"}},
		{"repeated key", "log:\n  level: info\n  level: debug\n", []string{"b.yaml:3: log.level: given twice (first on line 2)"}},
		{"listen not host:port", "listen: 8001\n", []string{"b.yaml:1: listen:", `"8001" is not host:port`}},
		{"listen bad port", "listen: 127.0.0.1:99999\n", []string{"listen:", "port"}},
		{"section not a mapping", "model: stories.gguf\n", []string{"b.yaml:1: model: model must be a mapping of path, name, aliases, context_length, threads, kv_type"}},
		{"top level a list", "- a\n- b\n", []string{"the top level must be a mapping"}},
		{"not yaml", "model: [\n", []string{"b.yaml: not valid YAML"}},
		{"context negative", "model:\n  context_length: -1\n", []string{"b.yaml:2: model.context_length: must be >= 0, got -1"}},
		{"threads not a number", "model:\n  threads: many\n", []string{`b.yaml:2: model.threads: "many" is not a whole number`}},
		{"threads a float", "model:\n  threads: 2.5\n", []string{`model.threads: "2.5" is not a whole number`}},
		{"threads huge", "model:\n  threads: 99999999999\n", []string{`model.threads: 99999999999 is out of range`}},
		{"kv type", "model:\n  kv_type: q8\n", []string{`model.kv_type: "q8" is not one of f16, f32`}},
		{"device unknown", "model:\n  device: cuda\n", []string{`b.yaml:2: model.device: "cuda" is not auto, cpu, gpu or gpu:N`, "edgellmd devices"}},
		{"device bad index", "model:\n  device: gpu:-1\n", []string{`b.yaml:2: model.device: "gpu:-1" is not auto, cpu, gpu or gpu:N`}},
		{"device empty", "model:\n  device: \"\"\n", []string{`model.device: "" is not auto, cpu, gpu or gpu:N`}},
		{"device a list", "model:\n  device: [gpu:0]\n", []string{"model.device: want a single value, not a list"}},
		{"model name control char", "model:\n  name: \"a\\tb\"\n", []string{"model.name: must not contain control characters"}},
		{"path a list", "model:\n  path: [a, b]\n", []string{"model.path: want a single value, not a list"}},
		{"alias empty", "model:\n  aliases: [gpt-4o, \"\"]\n", []string{"b.yaml:2: model.aliases[1]: must not be empty"}},
		{"alias is the name", "model:\n  name: m\n  aliases: [m]\n", []string{`b.yaml:3: model.aliases[0]: "m" is model.name already`}},
		{"alias twice", "model:\n  aliases: [a, b, a]\n", []string{`model.aliases[2]: "a" is listed twice`}},
		{"alias control char", "model:\n  aliases: [\"a\\nb\"]\n", []string{"model.aliases[0]: must not contain control characters"}},
		{"aliases not a list", "model:\n  aliases: gpt-4o\n", []string{"b.yaml:2: model.aliases: want a list, e.g. [gpt-4o-mini]"}},
		{"size with bad unit", "cache:\n  max_bytes: 12XB\n", []string{`b.yaml:2: cache.max_bytes: "12XB" is not a size (use e.g. 8GiB`}},
		{"size negative", "cache:\n  max_bytes: -1GiB\n", []string{`cache.max_bytes: "-1GiB": a size must not be negative`}},
		{"size overflow", "cache:\n  max_disk_bytes: 99999999999TiB\n", []string{`cache.max_disk_bytes: "99999999999TiB" is out of range`}},
		{"persist without disk", "cache:\n  max_disk_bytes: 0\n", []string{"b.yaml:2: cache.max_disk_bytes: must be > 0 when cache.persist is true"}},
		{"cache dir empty string", "cache:\n  dir: \"\"\n", []string{"cache.dir: must be a directory path"}},
		{"persist not bool", "cache:\n  persist: yes\n", []string{`cache.persist: "yes" is not a boolean (use true or false)`}},
		{"draft mode", "draft:\n  mode: mtp\n", []string{`b.yaml:2: draft.mode: "mtp" is not one of off, linear, tree`}},
		{"draft top_k zero", "draft:\n  top_k: 0\n", []string{"b.yaml:2: draft.top_k: must be between 1 and 32, got 0"}},
		{"draft steps", "draft:\n  steps: 0\n", []string{"draft.steps: must be between 1 and 64, got 0"}},
		{"draft verify_nodes", "draft:\n  verify_nodes: 5000\n", []string{"draft.verify_nodes: must be between 1 and 1024, got 5000"}},
		{"draft unknown drafter", "draft:\n  drafters: [mtp, eagle]\n", []string{`draft.drafters[1]: "eagle" is not one of mtp, suffix`}},
		{"draft drafter twice", "draft:\n  drafters: [mtp, mtp]\n", []string{`draft.drafters[1]: "mtp" is listed twice`}},
		{"draft no drafters", "draft:\n  mode: tree\n  drafters: []\n", []string{"draft.drafters: needs at least one of mtp, suffix when draft.mode is tree"}},
		{"drafters not a list", "draft:\n  drafters: mtp\n", []string{"draft.drafters: want a list"}},
		{"power pin id", "power:\n  pin: 0\n", []string{`b.yaml:2: power.pin: "0" looks like a mode id`}},
		{"power pin junk", "power:\n  pin: MAX N\n", []string{`power.pin: "MAX N" is not a power mode name`}},
		{"power interval not duration", "power:\n  check_interval: 30\n", []string{`b.yaml:2: power.check_interval: "30" is not a duration (use e.g. 30s`}},
		{"power interval too short", "power:\n  check_interval: 10ms\n", []string{"power.check_interval: must be at least 1s, got 10ms"}},
		{"jetson_clocks not bool", "power:\n  jetson_clocks: 1\n", []string{`power.jetson_clocks: "1" is not a boolean`}},
		{"api key with space", "api:\n  key: \"a b\"\n", []string{"api.key: must not contain spaces"}},
		{"queue depth zero", "api:\n  queue_depth: 0\n", []string{"b.yaml:2: api.queue_depth: must be between 1 and 65536, got 0"}},
		{"max body tiny", "api:\n  max_body_bytes: 10\n", []string{"api.max_body_bytes: must be at least 1KiB, got 10"}},
		{"request timeout zero", "api:\n  request_timeout: 0s\n", []string{"api.request_timeout: must be a positive duration, got 0s"}},
		{"drain negative", "api:\n  drain_timeout: -1s\n", []string{"api.drain_timeout: must be >= 0, got -1s"}},
		{"body timeout zero", "api:\n  body_timeout: 0s\n", []string{"b.yaml:2: api.body_timeout: must be a positive duration, got 0s"}},
		{"upload timeout negative", "api:\n  upload_timeout: -1m\n", []string{"api.upload_timeout: must be a positive duration, got -1m0s"}},
		{"public unknown", "api:\n  key: k\n  public: [metrics, admin]\n", []string{`b.yaml:3: api.public[1]: "admin" is not one of metrics, status`}},
		{"public twice", "api:\n  key: k\n  public: [status, status]\n", []string{`api.public[1]: "status" is listed twice`}},
		{"public not a list", "api:\n  public: status\n", []string{"b.yaml:2: api.public: want a list, e.g. [metrics, status]"}},
		{"cors origin not one", "api:\n  cors_origins: [\"https://ok.example\", app.example.com]\n", []string{`b.yaml:2: api.cors_origins[1]: "app.example.com" is not an origin`, "scheme://host[:port]"}},
		{"cors origin with a path", "api:\n  cors_origins: [\"https://app.example.com/\"]\n", []string{`api.cors_origins[0]: "https://app.example.com/" is not an origin`}},
		{"cors origin twice", "api:\n  cors_origins: [\"*\", \"*\"]\n", []string{`api.cors_origins[1]: "*" is listed twice`}},
		{"cors origins not a list", "api:\n  cors_origins: \"*\"\n", []string{"b.yaml:2: api.cors_origins: want a list, e.g. [https://app.example.com, http://localhost:3000]"}},
		{"connections zero", "api:\n  max_connections: 0\n", []string{"api.max_connections: must be between 1 and 1048576, got 0"}},
		{"per client over total", "api:\n  max_connections: 10\n  max_connections_per_client: 11\n",
			[]string{"b.yaml:3: api.max_connections_per_client: must be between 1 and api.max_connections (10), got 11"}},
		{"decode slowdown below 1.1", "engine:\n  decode_slowdown: 1\n", []string{"b.yaml:2: engine.decode_slowdown: must be 0 (off) or between 1.1 and 100 (times a decode-only pass), got 1"}},
		{"decode slowdown negative", "engine:\n  decode_slowdown: -2.5\n", []string{"engine.decode_slowdown: must be 0 (off) or between 1.1 and 100"}},
		{"decode slowdown not a number", "engine:\n  decode_slowdown: fast\n", []string{`b.yaml:2: engine.decode_slowdown: "fast" is not a number`}},
		{"decode slowdown not finite", "engine:\n  decode_slowdown: .inf\n", []string{`engine.decode_slowdown: ".inf" is not a number`}},
		{"memory budget tiny", "engine:\n  memory_budget: 512KiB\n", []string{"b.yaml:2: engine.memory_budget: must be 0 (from the memory available at start) or at least 1MiB, got 512KiB"}},
		{"memory budget not a size", "engine:\n  memory_budget: lots\n", []string{`b.yaml:2: engine.memory_budget: "lots" is not a size (use e.g. 8GiB`}},
		{"memory budget negative", "engine:\n  memory_budget: -8GiB\n", []string{`engine.memory_budget: "-8GiB": a size must not be negative`}},
		{"log level", "log:\n  level: loud\n", []string{`b.yaml:2: log.level: "loud" is not one of trace, debug, info, warn, error`}},
		{"log format", "log:\n  format: xml\n", []string{`log.format: "xml" is not one of auto, json, console`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig("b.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("no error for %q", c.src)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error is not a *ConfigError: %T", err)
			}
		})
	}
}

func TestAllErrorsReportedAtOnce(t *testing.T) {
	_, err := ParseConfig("m.yaml", []byte("draft:\n  top_k: 0\n  steps: 0\napi:\n  bogus: 1\n"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"m.yaml:5: api.bogus: unknown key", "m.yaml:2: draft.top_k", "m.yaml:3: draft.steps"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q missing %q", err, w)
		}
	}
}

func TestYAMLForms(t *testing.T) {
	cases := []struct {
		src   string
		check func(Config) bool
	}{
		{"draft:\n  mode: off\n", func(c Config) bool { return c.Draft.Mode == "off" }},
		{"draft: {mode: linear, steps: 3, top_k: 1}\n", func(c Config) bool { return c.Draft.Mode == "linear" && c.Draft.Steps == 3 }},
		{"api:\n  queue_depth: \"8\"\n", func(c Config) bool { return c.API.QueueDepth == 8 }},
		{"api:\n  queue_depth: 1_000\n", func(c Config) bool { return c.API.QueueDepth == 1000 }},
		{"api:\n  key: 12345\n", func(c Config) bool { return c.API.Key == "12345" }},
		{"model:\n  path:\n", func(c Config) bool { return c.Model.Path == "" && c.Model.KVType == "f16" }},
		{"x: &d {mode: tree}\n", nil}, // unknown key x
		{"cache:\n  persist: True\n", func(c Config) bool { return c.Cache.Persist }},
		{"cache:\n  max_bytes: 1048576\n", func(c Config) bool { return c.Cache.MaxBytes == MiB }},
		{"cache:\n  max_bytes: 0\n", func(c Config) bool { return c.Cache.MaxBytes == 0 }},
	}
	for _, c := range cases {
		cfg, err := ParseConfig("f.yaml", []byte(c.src))
		if c.check == nil {
			if err == nil {
				t.Errorf("%q: want an error", c.src)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if !c.check(cfg) {
			t.Errorf("%q: got %+v", c.src, cfg)
		}
	}
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want Size
	}{
		{"0", 0}, {"1024", 1024}, {"8GiB", 8 << 30}, {"8gib", 8 << 30}, {"512MiB", 512 << 20}, {"64KiB", 64 << 10},
		{"2TiB", 2 << 40}, {"8GB", 8e9}, {"500MB", 500e6}, {"1KB", 1000}, {"4G", 4 << 30}, {"16M", 16 << 20},
		{"1.5GiB", 3 << 29}, {"1 GiB", 1 << 30}, {"100B", 100}, {"2Gi", 2 << 30},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "GiB", "12XB", "1.2.3GB", "-5", "inf", "NaN", "1e400", "1 2 GB", "0x10"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	for _, s := range []Size{0, 1, 1023, KiB, 3 * MiB / 2, 2 * GiB, 5 * TiB, 1_000_000} {
		back, err := ParseSize(s.String())
		if err != nil || back != s {
			t.Errorf("%d -> %q -> %d, %v", s, s.String(), back, err)
		}
	}
}

func TestConfigDiff(t *testing.T) {
	a := DefaultConfig()
	b := DefaultConfig()
	b.Listen = ":1"
	b.Draft.Drafters = []string{"mtp"}
	b.Power.CheckInterval = Duration(time.Minute)
	got := configDiff(a, b)
	want := []string{"listen", "draft.drafters", "power.check_interval"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func TestConfigFileAndFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "edgellmd.yaml")
	if err := os.WriteFile(file, []byte("listen: 127.0.0.1:9100\nmodel:\n  path: /from/file.gguf\n  threads: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent.yaml")
	flags := func(c *Config) { c.Model.Path = "/from/flag.gguf" }
	var logs bytes.Buffer

	// Flags override the file; what the flags do not set comes from the file.
	d, err := newDaemon(Options{ConfigPath: file, Override: flags, LogOutput: &logs}, missing)
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Config(); c.Model.Path != "/from/flag.gguf" || c.Listen != "127.0.0.1:9100" || c.Model.Threads != 3 {
		t.Fatalf("got %+v", c)
	}

	// No file at the default path: defaults plus flags.
	d, err = newDaemon(Options{Override: flags, LogOutput: &logs}, missing)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Model.Path = "/from/flag.gguf"
	if c := d.Config(); !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v", c)
	}

	// The default path, when present, is read.
	d, err = newDaemon(Options{LogOutput: &logs}, file)
	if err != nil || d.Config().Model.Threads != 3 {
		t.Fatalf("default path not read: %v", err)
	}

	// An explicit -c that does not exist is an error naming it.
	if _, err := newDaemon(Options{ConfigPath: missing, LogOutput: &logs}, file); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing -c: %v", err)
	}

	// A flag with a bad value is refused, naming the key.
	bad := func(c *Config) { c.Listen = "nowhere" }
	if _, err := newDaemon(Options{Override: bad, LogOutput: &logs}, missing); err == nil || !strings.Contains(err.Error(), "listen:") {
		t.Fatalf("bad flag: %v", err)
	}

	// A bad file stops the start with the key and line.
	if err := os.WriteFile(file, []byte("draft:\n  top_k: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newDaemon(Options{ConfigPath: file, LogOutput: &logs}, missing); err == nil ||
		!strings.Contains(err.Error(), file+":2: draft.top_k: must be between 1 and 32, got 0") {
		t.Fatalf("bad file: %v", err)
	}
}

func TestBundledModelLookup(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "bin", "edgellmd")
	share := filepath.Join(dir, "share", "edgellmd", "models", BundledModel)
	paths := BundledModelPaths(exe)
	if len(paths) != 3 || paths[0] != "/usr/share/edgellmd/models/stories260K.gguf" ||
		filepath.Clean(paths[1]) != share || paths[2] != "testdata/models/stories260K.gguf" {
		t.Fatalf("paths %v", paths)
	}
	if _, err := findModel("", []string{filepath.Join(dir, "nope.gguf")}); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Fatalf("no model: %v", err)
	}
	os.MkdirAll(filepath.Dir(share), 0o755)
	os.WriteFile(share, []byte("x"), 0o644)
	if got, err := findModel("", []string{filepath.Join(dir, "nope.gguf"), paths[1]}); err != nil || filepath.Clean(got) != share {
		t.Fatalf("got %q %v", got, err)
	}
	if got, _ := findModel("/explicit.gguf", paths); got != "/explicit.gguf" {
		t.Fatalf("explicit path not kept: %q", got)
	}
	for in, want := range map[string]string{"/a/stories260K.gguf": "stories260K", "/a/b.GGUF": "b", "/a/model.bin": "model.bin"} {
		if got := servedName("", in); got != want {
			t.Errorf("servedName(%q) = %q", in, got)
		}
	}
	if servedName("mine", "/a/b.gguf") != "mine" {
		t.Error("model.name not used")
	}
}

// engine.memory_budget takes a size or a number of bytes; engine.decode_slowdown
// a number, 0 turning it off.
func TestEngineMemoryAndSlowdown(t *testing.T) {
	for _, c := range []struct {
		src      string
		budget   Size
		slowdown float64
	}{
		{"engine:\n  memory_budget: 8GiB\n", 8 * GiB, engine.DefaultDecodeSlowdown},
		{"engine:\n  memory_budget: 1.5 GB\n", 1_500_000_000, engine.DefaultDecodeSlowdown},
		{"engine:\n  memory_budget: 2147483648\n", 2 * GiB, engine.DefaultDecodeSlowdown},
		{"engine:\n  memory_budget: 0\n  decode_slowdown: 0\n", 0, 0},
		{"engine:\n  decode_slowdown: 4\n", 0, 4},
		{"engine:\n  decode_slowdown: \"1.5\"\n", 0, 1.5},
	} {
		cfg, err := ParseConfig("e.yaml", []byte(c.src))
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		if cfg.Engine.MemoryBudget != c.budget || cfg.Engine.DecodeSlowdown != c.slowdown {
			t.Errorf("%q: memory_budget %d, decode_slowdown %g; want %d, %g", c.src, cfg.Engine.MemoryBudget, cfg.Engine.DecodeSlowdown, c.budget, c.slowdown)
		}
	}
}
