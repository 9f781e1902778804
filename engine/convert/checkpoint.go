package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// checkpoint is an open Hugging Face checkpoint directory.
type checkpoint struct {
	dir     string
	hp      hparams              // config.json, text_config merged into the top level
	files   []*stFile            // open shards
	tensors map[string]*stTensor // every tensor of every shard, by name
	names   []string             // tensor names, shard by shard in data order
}

const (
	configFile      = "config.json"
	singleShardFile = "model.safetensors"
	shardIndexFile  = "model.safetensors.index.json"
)

// openCheckpoint reads config.json and maps the safetensors shards: those
// the index names, or model.safetensors, or every *.safetensors file.
func openCheckpoint(dir string) (_ *checkpoint, err error) {
	c := &checkpoint{dir: dir, tensors: map[string]*stTensor{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.hp, err = readConfig(filepath.Join(dir, configFile)); err != nil {
		return nil, err
	}

	shards, weightMap, err := c.shardList()
	if err != nil {
		return nil, err
	}
	for _, name := range shards {
		f, err := openSafetensors(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		c.files = append(c.files, f)
		for i := range f.Tensors {
			t := &f.Tensors[i]
			if prev, dup := c.tensors[t.Name]; dup {
				return nil, fmt.Errorf("checkpoint %s: tensor %q is in both %s and %s", dir, t.Name, prev.File, t.File)
			}
			if weightMap != nil && weightMap[t.Name] != name {
				return nil, fmt.Errorf("checkpoint %s: tensor %q is in %s, but %s maps it to %q", dir, t.Name, name, shardIndexFile, weightMap[t.Name])
			}
			c.tensors[t.Name] = t
			c.names = append(c.names, t.Name)
		}
	}
	for name, file := range weightMap {
		if _, ok := c.tensors[name]; !ok {
			return nil, fmt.Errorf("checkpoint %s: %s maps tensor %q to %s, which does not hold it (truncated or wrong shard?)", dir, shardIndexFile, name, file)
		}
	}
	if len(c.tensors) == 0 {
		return nil, fmt.Errorf("checkpoint %s: the safetensors files hold no tensors", dir)
	}
	return c, nil
}

// shardList names the safetensors files to read, and the index's weight map
// when there is an index.
func (c *checkpoint) shardList() ([]string, map[string]string, error) {
	idx, err := os.ReadFile(filepath.Join(c.dir, shardIndexFile))
	switch {
	case err == nil:
		var index struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(idx, &index); err != nil {
			return nil, nil, fmt.Errorf("checkpoint %s: %s: %v", c.dir, shardIndexFile, err)
		}
		if len(index.WeightMap) == 0 {
			return nil, nil, fmt.Errorf("checkpoint %s: %s has no weight_map", c.dir, shardIndexFile)
		}
		seen := map[string]bool{}
		var shards []string
		for name, file := range index.WeightMap {
			if file == "" || filepath.Base(file) != file {
				return nil, nil, fmt.Errorf("checkpoint %s: %s maps %q to %q: want a file name in the same folder", c.dir, shardIndexFile, name, file)
			}
			if !seen[file] {
				seen[file] = true
				shards = append(shards, file)
			}
		}
		sort.Strings(shards)
		return shards, index.WeightMap, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("checkpoint %s: %w", c.dir, err)
	}
	if _, err := os.Stat(filepath.Join(c.dir, singleShardFile)); err == nil {
		return []string{singleShardFile}, nil, nil
	}
	matches, err := filepath.Glob(filepath.Join(c.dir, "*.safetensors"))
	if err != nil {
		return nil, nil, err
	}
	if len(matches) == 0 {
		return nil, nil, fmt.Errorf("checkpoint %s: no %s, no %s and no other *.safetensors file", c.dir, singleShardFile, shardIndexFile)
	}
	var shards []string
	for _, m := range matches {
		shards = append(shards, filepath.Base(m))
	}
	sort.Strings(shards)
	return shards, nil, nil
}

// Close unmaps every shard.
func (c *checkpoint) Close() error {
	var first error
	for _, f := range c.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.files = nil
	return first
}

// hparams is a config.json object with typed, error-naming accessors.
type hparams struct {
	path string
	m    map[string]any
}

// readConfig reads config.json; the keys of a nested text_config (the text
// model of a multimodal checkpoint) override the top level, as llama.cpp's
// converter merges them.
func readConfig(path string) (hparams, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return hparams{}, fmt.Errorf("checkpoint: %w", err)
	}
	m, err := decodeObject(data)
	if err != nil {
		return hparams{}, fmt.Errorf("checkpoint %s: %v", path, err)
	}
	if tc, ok := m["text_config"].(map[string]any); ok {
		for k, v := range tc {
			m[k] = v
		}
	}
	return hparams{path: path, m: m}, nil
}

// decodeObject decodes a JSON object keeping numbers exact.
func decodeObject(data []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return m, nil
}

func (h hparams) has(key string) bool {
	v, ok := h.m[key]
	return ok && v != nil
}

// int reads a required non-negative integer below 2^31.
func (h hparams) int(key string) (int, error) {
	v, ok := h.m[key]
	if !ok || v == nil {
		return 0, fmt.Errorf("%s: key %q missing (want an integer)", h.path, key)
	}
	return h.toInt(key, v)
}

func (h hparams) toInt(key string, v any) (int, error) {
	n, ok := v.(json.Number)
	if ok {
		if i, err := n.Int64(); err == nil && i >= 0 && i <= math.MaxInt32 {
			return int(i), nil
		}
	}
	return 0, fmt.Errorf("%s: key %q = %v: want a non-negative integer", h.path, key, v)
}

// optInt reads an optional integer, def when absent or null.
func (h hparams) optInt(key string, def int) (int, error) {
	if !h.has(key) {
		return def, nil
	}
	return h.int(key)
}

// float reads a required number.
func (h hparams) float(key string) (float64, error) {
	v, ok := h.m[key]
	if !ok || v == nil {
		return 0, fmt.Errorf("%s: key %q missing (want a number)", h.path, key)
	}
	return h.toFloat(key, v)
}

func (h hparams) toFloat(key string, v any) (float64, error) {
	if n, ok := v.(json.Number); ok {
		if f, err := n.Float64(); err == nil && !math.IsInf(f, 0) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%s: key %q = %v: want a number", h.path, key, v)
}

func (h hparams) optBool(key string, def bool) (bool, error) {
	if !h.has(key) {
		return def, nil
	}
	b, ok := h.m[key].(bool)
	if !ok {
		return false, fmt.Errorf("%s: key %q = %v: want true or false", h.path, key, h.m[key])
	}
	return b, nil
}

func (h hparams) str(key string) string {
	s, _ := h.m[key].(string)
	return s
}

// object reads an optional nested object (nil when absent).
func (h hparams) object(key string) (map[string]any, error) {
	if !h.has(key) {
		return nil, nil
	}
	o, ok := h.m[key].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: key %q: want an object", h.path, key)
	}
	return o, nil
}

// architecture is architectures[0], or "" when the list is absent.
func (h hparams) architecture() string {
	if a, ok := h.m["architectures"].([]any); ok && len(a) > 0 {
		s, _ := a[0].(string)
		return s
	}
	return ""
}
