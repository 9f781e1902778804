// Command endturn copies a synthetic GGUF model and scales the LM-head row
// of its end-of-turn token (<|im_end|>), so that sampling ends a turn after
// a few tokens. A synthetic model's random weights almost never pick that
// one token of 151k, and an agent (Claude Code, Codex) treats an answer cut
// by the token limit as an error: scripts/agents-check.sh uses this file to
// check that the agents complete turns, which is about the protocol, not
// the text.
//
//	go run ./scripts/agents-check/endturn -in synth.gguf -out synth-endturn.gguf [-scale 12]
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/edgellmd/edgellmd/engine/gguf"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

func main() {
	in := flag.String("in", "", "synthetic GGUF model (F32 LM head)")
	out := flag.String("out", "", "output GGUF file")
	scale := flag.Float64("scale", 12, "factor for the end-of-turn token's LM-head row")
	token := flag.String("token", "<|im_end|>", "the end-of-turn token")
	flag.Parse()
	if err := run(*in, *out, *token, float32(*scale)); err != nil {
		fmt.Fprintln(os.Stderr, "endturn:", err)
		os.Exit(1)
	}
}

func run(in, out, token string, scale float32) error {
	f, err := gguf.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	// A tied head (no output.weight) is the token embedding: the token's
	// input embedding grows too, which only changes what the random
	// weights do with it.
	name := "output.weight"
	t, ok := f.Tensor(name)
	if !ok {
		name = "token_embd.weight"
		if t, ok = f.Tensor(name); !ok {
			return fmt.Errorf("%s has neither output.weight nor token_embd.weight", in)
		}
	}
	if t.Type != tensor.F32 {
		return fmt.Errorf("%s: %s is %v, want F32 (edgellmd synth --type F32)", in, name, t.Type)
	}
	tokens, _ := f.GetStrings("tokenizer.ggml.tokens")
	id := slices.Index(tokens, token)
	if id < 0 {
		return fmt.Errorf("%s: token %q is not in the vocabulary", in, token)
	}
	rowBytes := t.Shape[0] * 4
	at := f.DataOffset + t.Offset + int64(id)*rowBytes
	src, err := os.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	row := make([]byte, rowBytes)
	if _, err := dst.ReadAt(row, at); err != nil {
		dst.Close()
		return err
	}
	for i := 0; i < len(row); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(row[i:]))
		binary.LittleEndian.PutUint32(row[i:], math.Float32bits(v*scale))
	}
	if _, err := dst.WriteAt(row, at); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
