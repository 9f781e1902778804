package daemon

import (
	"io"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/web"
)

// DefaultConfigPath is where the packaged config file lives (a conffile).
const DefaultConfigPath = "/etc/edgellmd/edgellmd.yaml"

// Config is the daemon's configuration: the YAML file, then the command
// line's overrides. The yaml tags are the file's keys.
type Config struct {
	Listen string             `yaml:"listen"`
	Model  ModelConfig        `yaml:"model"`
	Engine EngineConfig       `yaml:"engine"`
	Cache  CacheConfig        `yaml:"cache"`
	Draft  speculative.Config `yaml:"draft"` // reloaded live (docs/design/speculative.md)
	Power  PowerConfig        `yaml:"power"`
	API    APIConfig          `yaml:"api"`
	Update UpdateConfig       `yaml:"update"`
	Log    LogConfig          `yaml:"log"`
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
	// GPUMatMul is how a GPU multiplies prefill chunks (passes of 64 rows
	// or more): auto (cooperative matrices, the tensor cores, where the
	// device has them), scalar, or coopmat (the start fails on a device
	// without them).
	GPUMatMul string `yaml:"gpu_matmul"`
}

// CacheConfig bounds the prefix cache and says where it persists.
type CacheConfig struct {
	Dir          string `yaml:"dir"`
	MaxBytes     Size   `yaml:"max_bytes"`      // in memory; 0 turns the prefix cache off
	MaxDiskBytes Size   `yaml:"max_disk_bytes"` // on disk under Dir
	Persist      bool   `yaml:"persist"`        // keep the cache across restarts
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
	// ResponsesStoreSize and ResponsesStoreTTL bound the OpenAI Responses
	// API's stored responses (previous_response_id, GET
	// /v1/responses/{id}), kept in memory.
	ResponsesStoreSize int      `yaml:"responses_store_size"`
	ResponsesStoreTTL  Duration `yaml:"responses_store_ttl"`
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
		Model:  ModelConfig{Aliases: []string{}, KVType: "f16", Activations: "q8", Device: "auto", GPUMatMul: "auto"},
		Engine: EngineConfig{MaxSequences: engine.DefaultMaxSequences, PrefillChunk: engine.DefaultPrefillChunk, DecodeSlowdown: engine.DefaultDecodeSlowdown},
		Cache: CacheConfig{
			Dir:          "/var/lib/edgellmd/cache",
			MaxBytes:     2 * GiB,
			MaxDiskBytes: 8 * GiB,
			Persist:      true,
		},
		Draft: speculative.DefaultConfig(),
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
			ResponsesStoreSize:      web.DefaultResponsesStoreSize,
			ResponsesStoreTTL:       Duration(web.DefaultResponsesStoreTTL),
		},
		Update: UpdateConfig{StateDir: "/var/lib/edgellmd", TrustedDir: "/etc/edgellmd/trusted.d", Keep: 3},
		Log:    LogConfig{Level: "info", Format: LogAuto},
	}
}

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
