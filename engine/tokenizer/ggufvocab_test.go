package tokenizer

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// This file holds a tiny, test-only GGUF reader, written apart from
// engine/gguf so that it is a second reading of the file, that dumps a
// model's tokenizer metadata into testdata as JSON (TestVocabFromGGUFStories
// holds VocabFromGGUF to it):
//
//	go test ./engine/tokenizer/ -run TestDumpGGUFVocab -update \
//	    -gguf /work/shared/models/stories260K.gguf -vocab-out testdata/stories260K-vocab.json

var (
	update   = flag.Bool("update", false, "regenerate golden files under testdata/")
	ggufPath = flag.String("gguf", "", "GGUF file to dump the vocab of (with -update)")
	vocabOut = flag.String("vocab-out", "testdata/stories260K-vocab.json", "where TestDumpGGUFVocab writes")
)

// ggufVocab is the tokenizer part of a GGUF file, as dumped to testdata.
type ggufVocab struct {
	Source         string    `json:"source"`
	Model          string    `json:"tokenizer.ggml.model"`
	Pre            string    `json:"tokenizer.ggml.pre,omitempty"`
	Tokens         []string  `json:"tokenizer.ggml.tokens"`
	Scores         []float32 `json:"tokenizer.ggml.scores,omitempty"`
	TokenType      []int32   `json:"tokenizer.ggml.token_type,omitempty"`
	Merges         []string  `json:"tokenizer.ggml.merges,omitempty"`
	BOS            *int64    `json:"tokenizer.ggml.bos_token_id,omitempty"`
	EOS            *int64    `json:"tokenizer.ggml.eos_token_id,omitempty"`
	UNK            *int64    `json:"tokenizer.ggml.unknown_token_id,omitempty"`
	PAD            *int64    `json:"tokenizer.ggml.padding_token_id,omitempty"`
	AddBOS         *bool     `json:"tokenizer.ggml.add_bos_token,omitempty"`
	AddEOS         *bool     `json:"tokenizer.ggml.add_eos_token,omitempty"`
	AddSpacePrefix *bool     `json:"tokenizer.ggml.add_space_prefix,omitempty"`
}

// loadVocabDump reads a dump TestDumpGGUFVocab wrote: the file's keys as
// they are, without the defaults VocabFromGGUF gives absent ones.
func loadVocabDump(t testing.TB, path string) ggufVocab {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g ggufVocab
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g
}

func TestDumpGGUFVocab(t *testing.T) {
	if !*update || *ggufPath == "" {
		t.Skip("run with -update -gguf FILE to regenerate " + *vocabOut)
	}
	kvs, err := readGGUFKVs(*ggufPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(*ggufPath)
	if err != nil {
		t.Fatal(err)
	}
	g := ggufVocab{Source: fmt.Sprintf("tokenizer metadata of %s (sha256 %x), dumped by TestDumpGGUFVocab",
		filepath.Base(*ggufPath), sha256.Sum256(raw))}
	for k, v := range kvs {
		var ok bool
		switch k {
		case "tokenizer.ggml.model":
			g.Model, ok = v.(string)
		case "tokenizer.ggml.pre":
			g.Pre, ok = v.(string)
		case "tokenizer.ggml.tokens":
			g.Tokens, ok = v.([]string)
		case "tokenizer.ggml.merges":
			g.Merges, ok = v.([]string)
		case "tokenizer.ggml.scores":
			g.Scores, ok = v.([]float32)
		case "tokenizer.ggml.token_type":
			g.TokenType, ok = v.([]int32)
		case "tokenizer.ggml.bos_token_id":
			g.BOS, ok = intPtr(v)
		case "tokenizer.ggml.eos_token_id":
			g.EOS, ok = intPtr(v)
		case "tokenizer.ggml.unknown_token_id":
			g.UNK, ok = intPtr(v)
		case "tokenizer.ggml.padding_token_id":
			g.PAD, ok = intPtr(v)
		case "tokenizer.ggml.add_bos_token":
			g.AddBOS, ok = boolPtr(v)
		case "tokenizer.ggml.add_eos_token":
			g.AddEOS, ok = boolPtr(v)
		case "tokenizer.ggml.add_space_prefix":
			g.AddSpacePrefix, ok = boolPtr(v)
		default:
			continue
		}
		if !ok {
			t.Fatalf("%s: unexpected type %T", k, v)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(&g); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*vocabOut, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d tokens", *vocabOut, len(g.Tokens))
}

func intPtr(v any) (*int64, bool) {
	var x int64
	switch v := v.(type) {
	case uint32:
		x = int64(v)
	case int32:
		x = int64(v)
	case uint64:
		x = int64(v)
	case int64:
		x = v
	default:
		return nil, false
	}
	return &x, true
}

func boolPtr(v any) (*bool, bool) {
	b, ok := v.(bool)
	return &b, ok
}

// readGGUFKVs returns the metadata of a GGUF v2/v3 file (ggml/include/gguf.h):
// magic, version, tensor count, KV count, then key/type/value triples.
// Arrays of strings, float32 and integers become []string, []float32, []int32.
func readGGUFKVs(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &ggufReader{r: bufio.NewReader(f)}
	var magic [4]byte
	r.read(magic[:])
	version := r.u32()
	r.u64() // tensors
	nKV := r.u64()
	if r.err == nil && (string(magic[:]) != "GGUF" || version < 2) {
		return nil, fmt.Errorf("%s: not a GGUF v2+ file", path)
	}
	kvs := map[string]any{}
	for i := uint64(0); i < nKV && r.err == nil; i++ {
		key := r.str()
		kvs[key] = r.value(r.u32())
	}
	if r.err != nil {
		return nil, fmt.Errorf("%s: %w", path, r.err)
	}
	return kvs, nil
}

type ggufReader struct {
	r   io.Reader
	err error
}

func (r *ggufReader) read(b []byte) {
	if r.err == nil {
		_, r.err = io.ReadFull(r.r, b)
	}
}

func (r *ggufReader) u32() uint32 {
	var b [4]byte
	r.read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}
func (r *ggufReader) u64() uint64 {
	var b [8]byte
	r.read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func (r *ggufReader) str() string {
	n := r.u64()
	if r.err != nil || n > 1<<20 {
		if r.err == nil {
			r.err = fmt.Errorf("string of %d bytes", n)
		}
		return ""
	}
	b := make([]byte, n)
	r.read(b)
	return string(b)
}

// GGUF value types.
const (
	ggufU8, ggufI8, ggufU16, ggufI16, ggufU32, ggufI32, ggufF32, ggufBool, ggufString, ggufArray, ggufU64, ggufI64, ggufF64 = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
)

func (r *ggufReader) value(t uint32) any {
	var b [8]byte
	switch t {
	case ggufU8, ggufI8, ggufBool:
		r.read(b[:1])
		switch t {
		case ggufU8:
			return b[0]
		case ggufI8:
			return int8(b[0])
		}
		return b[0] != 0
	case ggufU16, ggufI16:
		r.read(b[:2])
		if t == ggufU16 {
			return binary.LittleEndian.Uint16(b[:])
		}
		return int16(binary.LittleEndian.Uint16(b[:]))
	case ggufU32:
		return r.u32()
	case ggufI32:
		return int32(r.u32())
	case ggufF32:
		return math.Float32frombits(r.u32())
	case ggufU64:
		return r.u64()
	case ggufI64:
		return int64(r.u64())
	case ggufF64:
		return math.Float64frombits(r.u64())
	case ggufString:
		return r.str()
	case ggufArray:
		et, n := r.u32(), r.u64()
		if r.err != nil || n > 1<<24 {
			if r.err == nil {
				r.err = fmt.Errorf("array of %d elements", n)
			}
			return nil
		}
		switch et {
		case ggufString:
			out := make([]string, n)
			for i := range out {
				out[i] = r.str()
			}
			return out
		case ggufF32:
			out := make([]float32, n)
			for i := range out {
				out[i] = math.Float32frombits(r.u32())
			}
			return out
		case ggufI32, ggufU32:
			out := make([]int32, n)
			for i := range out {
				out[i] = int32(r.u32())
			}
			return out
		}
		out := make([]any, n)
		for i := range out {
			out[i] = r.value(et)
		}
		return out
	}
	if r.err == nil {
		r.err = fmt.Errorf("unknown GGUF value type %d", t)
	}
	return nil
}
