// Validation: the range and consistency checks of every value.

package daemon

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/tensor"
	"github.com/edgellmd/edgellmd/web"
)

// Validate checks every value, for a Config built in code or changed by
// flags after the file was read.
func (c *Config) Validate() error { return c.validate("", nil) }

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
	if _, err := tensor.ParseKVType(c.Model.KVType); err != nil {
		bad("model.kv_type", "%v", err)
	}
	if _, err := tensor.ParseActivations(c.Model.Activations); err != nil {
		bad("model.activations", "%v", err)
	}
	if err := engine.ParseDevice(c.Model.Device); err != nil {
		bad("model.device", "%q is not auto, cpu, gpu or gpu:N (N counts from 0 over the devices `edgellmd devices` lists)", c.Model.Device)
	}
	if err := engine.ParseGPUMatMul(c.Model.GPUMatMul); err != nil {
		bad("model.gpu_matmul", "%q is not auto, scalar or coopmat", c.Model.GPUMatMul)
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

	for _, p := range c.Draft.Problems() {
		bad(p.Key, "%s", p.Msg)
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
	}{{"api.body_timeout", c.API.BodyTimeout}, {"api.upload_timeout", c.API.UploadTimeout}, {"api.request_timeout", c.API.RequestTimeout},
		{"api.responses_store_ttl", c.API.ResponsesStoreTTL}} {
		if d.v <= 0 {
			bad(d.key, "must be a positive duration, got %s", d.v)
		}
	}
	if c.API.DrainTimeout < 0 {
		bad("api.drain_timeout", "must be >= 0, got %s", c.API.DrainTimeout)
	}
	between("api.max_connections", c.API.MaxConnections, 1, 1<<20)
	between("api.responses_store_size", c.API.ResponsesStoreSize, 1, 1<<20)
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
