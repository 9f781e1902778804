package daemon

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/web"
)

// DefaultConfigPath is where the packaged config file lives (a conffile).
const DefaultConfigPath = "/etc/edgellmd/edgellmd.yaml"

// Config is the daemon's configuration: the YAML file, then the command
// line's overrides. The yaml tags are the file's keys.
type Config struct {
	Listen string       `yaml:"listen"`
	Model  ModelConfig  `yaml:"model"`
	Engine EngineConfig `yaml:"engine"`
	Cache  CacheConfig  `yaml:"cache"`
	Draft  DraftConfig  `yaml:"draft"`
	Power  PowerConfig  `yaml:"power"`
	API    APIConfig    `yaml:"api"`
	Update UpdateConfig `yaml:"update"`
	Log    LogConfig    `yaml:"log"`
}

// EngineConfig shapes how generations share the engine.
type EngineConfig struct {
	// MaxSequences is how many requests generate at once, their steps in
	// shared forward passes (on a GPU too); more wait in the queue.
	MaxSequences int `yaml:"max_sequences"`
	// PrefillChunk bounds a prompt's tokens per forward pass, so that a
	// long prompt shares the passes with the others' decode steps.
	PrefillChunk int `yaml:"prefill_chunk"`
	// DecodeSlowdown bounds a pass that carries a prompt chunk beside
	// others' decode steps to this multiple of a decode-only pass (the
	// chunk is cut to fit, as the passes measure, or waits for passes that
	// save up for it: the others' mean time per token stays within it);
	// 0 turns it off.
	DecodeSlowdown float64 `yaml:"decode_slowdown"`
	// MemoryBudget bounds the sequence states (KV and recurrent state of
	// the running requests and of idle slots); a request waits until its
	// state fits. 0: the memory available at start, less the model, the
	// prefix cache and a margin.
	MemoryBudget Size `yaml:"memory_budget"`
}

// ModelConfig says which model to serve and how.
type ModelConfig struct {
	// Path is the GGUF file; "" means the bundled model (BundledModelPaths).
	Path string `yaml:"path"`
	// Name is the model id clients send and /v1/models lists; "" means the
	// file name without ".gguf".
	Name string `yaml:"name"`
	// Aliases are more ids clients may send for the model (a client
	// configured for another model's name is served); /v1/models lists them
	// after Name. Answers name Name.
	Aliases []string `yaml:"aliases"`
	// ContextLength is the tokens a sequence may hold; 0 means the model's own.
	ContextLength int `yaml:"context_length"`
	// Threads is the kernels' worker threads; 0 means all cores.
	Threads int `yaml:"threads"`
	// KVType is the KV cache element type: f16 (llama.cpp's default), f32
	// or fp8 (E4M3 with the file's per-layer scales).
	KVType string `yaml:"kv_type"`
	// Activations is how NVFP4 weights meet activations: q8 (W4A8, as
	// llama.cpp), f32 (W4A16) or nvfp4 (W4A4).
	Activations string `yaml:"activations"`
	// Device is where the model runs: auto (a real GPU when the Vulkan
	// loader sees one, else the CPU; never Vulkan on the CPU), cpu, gpu
	// (the first real GPU) or gpu:N (the Nth device `edgellmd devices`
	// lists). A GPU named here that cannot be used stops the start.
	Device string `yaml:"device"`
}

// CacheConfig bounds the prefix cache and says where it persists.
type CacheConfig struct {
	Dir          string `yaml:"dir"`
	MaxBytes     Size   `yaml:"max_bytes"`      // in memory; 0 turns the prefix cache off
	MaxDiskBytes Size   `yaml:"max_disk_bytes"` // on disk under Dir
	Persist      bool   `yaml:"persist"`        // keep the cache across restarts
}

// DraftConfig are the speculative decoding parameters (ARCHITECTURE.md,
// "Speculative decoding"); they are reloaded live.
type DraftConfig struct {
	Mode        string   `yaml:"mode"`         // off, linear or tree
	Steps       int      `yaml:"steps"`        // draft depth
	TopK        int      `yaml:"top_k"`        // candidates kept per depth (tree)
	VerifyNodes int      `yaml:"verify_nodes"` // tree size verified in one forward pass
	Drafters    []string `yaml:"drafters"`     // mtp, suffix
}

// PowerConfig is the Jetson power mode to pin and how to watch it.
type PowerConfig struct {
	Pin           string   `yaml:"pin"` // nvpmodel mode name; "" pins nothing
	JetsonClocks  bool     `yaml:"jetson_clocks"`
	CheckInterval Duration `yaml:"check_interval"`
	Repin         bool     `yaml:"repin"` // switch back when the mode drifted
}

// APIConfig shapes the HTTP API.
type APIConfig struct {
	Key string `yaml:"key"` // bearer token; "" means no authentication
	// Public opens route groups without Key: metrics (/metrics), status
	// (the status page, its static files, /status.json).
	Public []string `yaml:"public"`
	// CORSOrigins are the origins (scheme://host[:port], or "*") whose web
	// pages may call the API routes from a browser; none by default.
	CORSOrigins []string `yaml:"cors_origins"`
	// SpecialTokensInMessages lets control-token text in message content
	// become control tokens (Hugging Face's and llama.cpp's behaviour);
	// by default it stays text, so no message can forge a turn.
	SpecialTokensInMessages bool     `yaml:"special_tokens_in_messages"`
	QueueDepth              int      `yaml:"queue_depth"`
	MaxBodyBytes            Size     `yaml:"max_body_bytes"`
	BodyTimeout             Duration `yaml:"body_timeout"`   // to send a request body, after its headers
	UploadTimeout           Duration `yaml:"upload_timeout"` // the same for a bundle sent to /admin/update
	RequestTimeout          Duration `yaml:"request_timeout"`
	DrainTimeout            Duration `yaml:"drain_timeout"` // on stop: how long in-flight requests may finish
	// MaxConnections caps the open connections in all, and
	// MaxConnectionsPerClient those from one IP address; more are refused
	// with a 503 at once.
	MaxConnections          int `yaml:"max_connections"`
	MaxConnectionsPerClient int `yaml:"max_connections_per_client"`
}

// publicRoutes are the values api.public takes.
var publicRoutes = []string{web.PublicMetrics, web.PublicStatus}

// UpdateConfig says where signed model bundles are installed (package
// update) and which keys may sign them.
type UpdateConfig struct {
	// StateDir holds bundles/<version>/, the current symlink and
	// update.json; the committed bundle's model is served when model.path
	// is empty.
	StateDir   string `yaml:"state_dir"`
	TrustedDir string `yaml:"trusted_dir"` // *.pub keys that may sign bundles
	Keep       int    `yaml:"keep"`        // committed bundles kept on disk (current and previous always)
}

// LogConfig sets the logger.
type LogConfig struct {
	Level  string    `yaml:"level"`  // debug, info, warn, error
	Format LogFormat `yaml:"format"` // auto, json, console
}

// DefaultConfig is the configuration with no file and no flags; the packaged
// packaging/edgellmd.yaml spells out the same values.
func DefaultConfig() Config {
	return Config{
		Listen: "127.0.0.1:8001",
		Model:  ModelConfig{Aliases: []string{}, KVType: "f16", Activations: "q8", Device: "auto"},
		Engine: EngineConfig{MaxSequences: engine.DefaultMaxSequences, PrefillChunk: engine.DefaultPrefillChunk, DecodeSlowdown: engine.DefaultDecodeSlowdown},
		Cache: CacheConfig{
			Dir:          "/var/lib/edgellmd/cache",
			MaxBytes:     2 * GiB,
			MaxDiskBytes: 8 * GiB,
			Persist:      true,
		},
		Draft: DraftConfig{Mode: "off", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}},
		Power: PowerConfig{Pin: "MAXN", CheckInterval: Duration(30 * time.Second), Repin: true},
		API: APIConfig{
			Public:                  []string{},
			CORSOrigins:             []string{},
			QueueDepth:              16,
			MaxBodyBytes:            16 * MiB,
			BodyTimeout:             Duration(30 * time.Second),
			UploadTimeout:           Duration(10 * time.Minute),
			RequestTimeout:          Duration(10 * time.Minute),
			DrainTimeout:            Duration(30 * time.Second),
			MaxConnections:          256,
			MaxConnectionsPerClient: 64,
		},
		Update: UpdateConfig{StateDir: "/var/lib/edgellmd", TrustedDir: "/etc/edgellmd/trusted.d", Keep: 3},
		Log:    LogConfig{Level: "info", Format: LogAuto},
	}
}

// ConfigError is one thing wrong in a config: the key (dotted path, e.g.
// "draft.top_k"), where it is, and what would be right.
type ConfigError struct {
	File string // "" when the value came from defaults or flags
	Line int    // 0 when unknown
	Key  string
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadConfig reads the config file at path over the defaults and validates
// it. A missing file is an error wrapping fs.ErrNotExist.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes data (the file name is for messages) over the
// defaults, strictly: unknown keys, values of the wrong type and values out
// of range are errors naming the key and line. All problems are reported
// at once, joined.
func ParseConfig(name string, data []byte) (Config, error) {
	cfg := DefaultConfig()
	lines, err := decodeConfig(name, data, &cfg)
	// Values that failed to decode kept their defaults, so validating what
	// did decode adds only new problems: report them all at once.
	if err := errors.Join(err, cfg.validate(name, lines)); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks every value, for a Config built in code or changed by
// flags after the file was read.
func (c *Config) Validate() error { return c.validate("", nil) }

// decodeConfig walks the YAML tree itself (rather than yaml.v3's
// KnownFields) so that every error carries the dotted key and its line.
func decodeConfig(name string, data []byte, cfg *Config) (map[string]int, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &ConfigError{File: name, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	d := decoder{file: name, lines: map[string]int{}}
	root := &doc
	if root.Kind == 0 {
		return d.lines, nil // no document at all
	}
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return d.lines, nil // empty file: all defaults
		}
		root = root.Content[0]
	}
	if isNull(root) {
		return d.lines, nil
	}
	d.value("", root, reflect.ValueOf(cfg).Elem())
	return d.lines, errors.Join(d.errs...)
}

type decoder struct {
	file  string
	lines map[string]int // key path -> line of the key
	errs  []error
}

func (d *decoder) fail(n *yaml.Node, key, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	if l, ok := d.lines[key]; ok {
		line = l
	}
	d.errs = append(d.errs, &ConfigError{File: d.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// listExamples are the values a list key's error message shows.
var listExamples = map[string][]string{"draft.drafters": {"mtp", "suffix"}, "api.public": publicRoutes,
	"model.aliases": {"gpt-4o-mini"}, "api.cors_origins": {"https://app.example.com", "http://localhost:3000"}}

var (
	sizeType     = reflect.TypeFor[Size]()
	durationType = reflect.TypeFor[Duration]()
)

// value decodes node n into v, the field at dotted key path.
func (d *decoder) value(path string, n *yaml.Node, v reflect.Value) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if isNull(n) {
		return // an empty value keeps the default
	}
	switch {
	case v.Type() == sizeType:
		s, err := scalar(n)
		if err == nil {
			var sz Size
			if sz, err = ParseSize(s); err == nil {
				v.Set(reflect.ValueOf(sz))
				return
			}
		}
		d.fail(n, path, "%v", err)
	case v.Type() == durationType:
		s, err := scalar(n)
		if err == nil {
			var dur time.Duration
			if dur, err = parseDuration(s); err == nil {
				v.Set(reflect.ValueOf(Duration(dur)))
				return
			}
		}
		d.fail(n, path, "%v", err)
	case v.Kind() == reflect.Struct:
		d.mapping(path, n, v)
	case v.Kind() == reflect.String:
		s, err := scalar(n)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		v.SetString(s)
	case v.Kind() == reflect.Int:
		s, err := scalar(n)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(s), "_", ""), 10, 32)
		if errors.Is(err, strconv.ErrRange) {
			d.fail(n, path, "%s is out of range", s)
			return
		}
		if err != nil || (n.Tag != "!!int" && n.Tag != "!!str") {
			d.fail(n, path, "%q is not a whole number", s)
			return
		}
		v.SetInt(i)
	case v.Kind() == reflect.Float64:
		s, err := scalar(n)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || (n.Tag != "!!float" && n.Tag != "!!int" && n.Tag != "!!str") {
			d.fail(n, path, "%q is not a number", s)
			return
		}
		v.SetFloat(f)
	case v.Kind() == reflect.Bool:
		s, err := scalar(n)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		switch strings.ToLower(s) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.fail(n, path, "%q is not a boolean (use true or false)", s)
		}
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "want a list, e.g. [%s]", strings.Join(listExamples[path], ", "))
			return
		}
		out := make([]string, 0, len(n.Content))
		for i, item := range n.Content {
			for item.Kind == yaml.AliasNode && item.Alias != nil {
				item = item.Alias
			}
			s, err := scalar(item)
			if err != nil {
				d.fail(item, fmt.Sprintf("%s[%d]", path, i), "%v", err)
				continue
			}
			out = append(out, s)
		}
		v.Set(reflect.ValueOf(out))
	default:
		panic(fmt.Sprintf("config: field %s has unsupported type %s", path, v.Type()))
	}
}

// mapping decodes a YAML mapping into struct v, refusing unknown and
// repeated keys.
func (d *decoder) mapping(path string, n *yaml.Node, v reflect.Value) {
	where := path
	if where == "" {
		where = "the top level"
	}
	fields := yamlFields(v.Type())
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "%s must be a mapping of %s", where, strings.Join(fieldNames(fields), ", "))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		full := key
		if path != "" {
			full = path + "." + key
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be plain names")
			continue
		}
		idx, ok := fields[key]
		if !ok {
			msg := fmt.Sprintf("unknown key; %s has %s", where, strings.Join(fieldNames(fields), ", "))
			if s := closest(key, fieldNames(fields)); s != "" {
				msg = fmt.Sprintf("unknown key (did you mean %s?); %s has %s", s, where, strings.Join(fieldNames(fields), ", "))
			}
			d.errs = append(d.errs, &ConfigError{File: d.file, Line: k.Line, Key: full, Msg: msg})
			continue
		}
		if first, dup := seen[key]; dup {
			d.errs = append(d.errs, &ConfigError{File: d.file, Line: k.Line, Key: full,
				Msg: fmt.Sprintf("given twice (first on line %d)", first)})
			continue
		}
		seen[key] = k.Line
		d.lines[full] = k.Line
		d.value(full, val, v.Field(idx))
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// scalar returns a scalar node's text; mappings and lists are refused.
func scalar(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, nil
	case yaml.MappingNode:
		return "", errors.New("want a single value, not a mapping")
	case yaml.SequenceNode:
		return "", errors.New("want a single value, not a list")
	default:
		return "", errors.New("want a single value")
	}
}

// yamlFields maps a struct's yaml keys to field indexes.
func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			m[tag] = i
		}
	}
	return m
}

func fieldNames(fields map[string]int) []string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return fields[a] - fields[b] })
	return names
}

// closest returns the candidate within two edits of key, if one is.
func closest(key string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(key), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// validate checks ranges and cross-field rules; lines (key -> line) place
// the errors in the file when known.
func (c *Config) validate(file string, lines map[string]int) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		line := lines[key]
		if base, _, ok := strings.Cut(key, "["); ok && line == 0 {
			line = lines[base] // a list item: the list's line
		}
		errs = append(errs, &ConfigError{File: file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	atLeast := func(key string, v, lo int) {
		if v < lo {
			bad(key, "must be >= %d, got %d", lo, v)
		}
	}
	between := func(key string, v, lo, hi int) {
		if v < lo || v > hi {
			bad(key, "must be between %d and %d, got %d", lo, hi, v)
		}
	}
	oneOf := func(key, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			bad(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
	}

	if err := checkListen(c.Listen); err != nil {
		bad("listen", "%v", err)
	}

	control := func(r rune) bool { return r < ' ' || r == 0x7f }
	if strings.ContainsFunc(c.Model.Name, control) {
		bad("model.name", "must not contain control characters")
	}
	for i, a := range c.Model.Aliases {
		key := fmt.Sprintf("model.aliases[%d]", i)
		switch {
		case a == "":
			bad(key, "must not be empty")
		case strings.ContainsFunc(a, control):
			bad(key, "must not contain control characters")
		case a == c.Model.Name:
			bad(key, "%q is model.name already", a)
		case slices.Index(c.Model.Aliases, a) < i:
			bad(key, "%q is listed twice", a)
		}
	}
	atLeast("model.context_length", c.Model.ContextLength, 0)
	between("model.threads", c.Model.Threads, 0, 1024)
	oneOf("model.kv_type", c.Model.KVType, "f16", "f32", "fp8")
	oneOf("model.activations", c.Model.Activations, "q8", "f32", "nvfp4")
	if err := engine.ParseDevice(c.Model.Device); err != nil {
		bad("model.device", "%q is not auto, cpu, gpu or gpu:N (N counts from 0 over the devices `edgellmd devices` lists)", c.Model.Device)
	}

	if c.Cache.Dir == "" {
		bad("cache.dir", "must be a directory path")
	}
	if c.Cache.MaxBytes < 0 {
		bad("cache.max_bytes", "must be >= 0, got %s", c.Cache.MaxBytes)
	}
	if c.Cache.MaxDiskBytes < 0 {
		bad("cache.max_disk_bytes", "must be >= 0, got %s", c.Cache.MaxDiskBytes)
	}
	if c.Cache.Persist && c.Cache.MaxDiskBytes == 0 {
		bad("cache.max_disk_bytes", "must be > 0 when cache.persist is true (or set persist: false)")
	}

	oneOf("draft.mode", c.Draft.Mode, "off", "linear", "tree")
	between("draft.steps", c.Draft.Steps, 1, 64)
	between("draft.top_k", c.Draft.TopK, 1, 32)
	between("draft.verify_nodes", c.Draft.VerifyNodes, 1, 1024)
	if c.Draft.Mode != "off" && len(c.Draft.Drafters) == 0 {
		bad("draft.drafters", "needs at least one of mtp, suffix when draft.mode is %s", c.Draft.Mode)
	}
	for i, d := range c.Draft.Drafters {
		key := fmt.Sprintf("draft.drafters[%d]", i)
		if !slices.Contains([]string{"mtp", "suffix"}, d) {
			bad(key, "%q is not one of mtp, suffix", d)
		} else if slices.Index(c.Draft.Drafters, d) < i {
			bad(key, "%q is listed twice", d)
		}
	}

	if strings.ContainsFunc(c.Power.Pin, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		bad("power.pin", "%q is not a power mode name (letters, digits, _ and -, as nvpmodel lists them, e.g. MAXN)", c.Power.Pin)
	} else if _, err := strconv.Atoi(c.Power.Pin); err == nil {
		bad("power.pin", "%q looks like a mode id; give the mode's name as nvpmodel lists it (e.g. MAXN): ids differ between boards", c.Power.Pin)
	}
	if c.Power.CheckInterval < Duration(time.Second) {
		bad("power.check_interval", "must be at least 1s, got %s", c.Power.CheckInterval)
	}

	if strings.ContainsFunc(c.API.Key, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		bad("api.key", "must not contain spaces or control characters (it is sent as a bearer token)")
	}
	for i, o := range c.API.CORSOrigins {
		key := fmt.Sprintf("api.cors_origins[%d]", i)
		if err := web.CheckCORSOrigin(o); err != nil {
			bad(key, "%v", err)
		} else if slices.Index(c.API.CORSOrigins, o) < i {
			bad(key, "%q is listed twice", o)
		}
	}
	between("api.queue_depth", c.API.QueueDepth, 1, 65536)
	between("engine.max_sequences", c.Engine.MaxSequences, 1, 64)
	between("engine.prefill_chunk", c.Engine.PrefillChunk, 16, 8192)
	if f := c.Engine.DecodeSlowdown; f != 0 && (f < 1.1 || f > 100) {
		bad("engine.decode_slowdown", "must be 0 (off) or between 1.1 and 100 (times a decode-only pass), got %g", f)
	}
	if b := c.Engine.MemoryBudget; b < 0 || b > 0 && b < MiB {
		bad("engine.memory_budget", "must be 0 (from the memory available at start) or at least 1MiB, got %s", b)
	}
	if c.API.MaxBodyBytes < KiB {
		bad("api.max_body_bytes", "must be at least 1KiB, got %s", c.API.MaxBodyBytes)
	}
	for i, p := range c.API.Public {
		key := fmt.Sprintf("api.public[%d]", i)
		if !slices.Contains(publicRoutes, p) {
			bad(key, "%q is not one of %s (metrics: /metrics; status: the status page, /static/ and /status.json)", p, strings.Join(publicRoutes, ", "))
		} else if slices.Index(c.API.Public, p) < i {
			bad(key, "%q is listed twice", p)
		}
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"api.body_timeout", c.API.BodyTimeout}, {"api.upload_timeout", c.API.UploadTimeout}, {"api.request_timeout", c.API.RequestTimeout}} {
		if d.v <= 0 {
			bad(d.key, "must be a positive duration, got %s", d.v)
		}
	}
	if c.API.DrainTimeout < 0 {
		bad("api.drain_timeout", "must be >= 0, got %s", c.API.DrainTimeout)
	}
	between("api.max_connections", c.API.MaxConnections, 1, 1<<20)
	if n := c.API.MaxConnectionsPerClient; n < 1 || n > max(c.API.MaxConnections, 1) {
		bad("api.max_connections_per_client", "must be between 1 and api.max_connections (%d), got %d", c.API.MaxConnections, n)
	}

	if c.Update.StateDir == "" {
		bad("update.state_dir", "must be a directory path")
	}
	if c.Update.TrustedDir == "" {
		bad("update.trusted_dir", "must be a directory path")
	}
	between("update.keep", c.Update.Keep, 1, 100)

	oneOf("log.level", c.Log.Level, "trace", "debug", "info", "warn", "error")
	oneOf("log.format", string(c.Log.Format), string(LogAuto), string(LogJSON), string(LogConsole))
	return errors.Join(errs...)
}

func checkListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:8001, or :8001 for every interface)", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("%q: %q is not a host name or IP address", addr, host)
	}
	return nil
}

// Size is a number of bytes, written in the file as "8GiB", "512MB" or a
// plain number of bytes.
type Size int64

// Binary size units.
const (
	KiB Size = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

var sizeUnits = []struct {
	name string
	mult float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	// Bare K, M, G, T are binary, as systemd reads them (MemoryMax=4G).
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1}, {"", 1},
}

// ParseSize reads "8GiB", "1.5 GB", "512MiB", "4G" (binary, as systemd),
// "1048576". Units are case-insensitive.
func ParseSize(s string) (Size, error) {
	bad := fmt.Errorf("%q is not a size (use e.g. 8GiB, 512MiB or a number of bytes)", s)
	t := strings.ToLower(strings.TrimSpace(s))
	num := strings.TrimRightFunc(t, func(r rune) bool { return r >= 'a' && r <= 'z' })
	unit := strings.TrimSpace(t[len(num):])
	num = strings.TrimSpace(num)
	if num == "" {
		return 0, bad
	}
	for _, u := range sizeUnits {
		if u.name != unit {
			continue
		}
		if i, err := strconv.ParseInt(num, 10, 64); err == nil {
			if i < 0 {
				return 0, fmt.Errorf("%q: a size must not be negative", s)
			}
			if u.mult > 1 && i > int64(1<<63-1)/int64(u.mult) {
				return 0, fmt.Errorf("%q is out of range", s)
			}
			return Size(i * int64(u.mult)), nil
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f < 0 || f != f {
			return 0, bad
		}
		v := f * u.mult
		if v >= 1<<63 {
			return 0, fmt.Errorf("%q is out of range", s)
		}
		return Size(v), nil
	}
	return 0, bad
}

// String writes the size in the largest binary unit that divides it exactly.
func (s Size) String() string {
	for _, u := range []struct {
		name string
		v    Size
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if s != 0 && s%u.v == 0 {
			return strconv.FormatInt(int64(s/u.v), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// MarshalYAML writes the size as String does.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalText writes the size as String does (JSON for the status page).
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Duration is a time.Duration written as "30s", "10m", "1h30m".
type Duration time.Duration

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use e.g. 30s, 10m or 1h)", s)
	}
	return d, nil
}

// D is the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration as "30s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalText writes the duration as "30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Encode writes c as a config file (the effective configuration, for
// `serve --check-config`).
func (c Config) Encode(w io.Writer) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return err
	}
	return enc.Close()
}
