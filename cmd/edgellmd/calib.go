package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// calibPrompts returns the token sequences quantize calibrates on: none
// ("none"), the model's own text ("own": ownTokens tokens it samples from
// its BOS, in four sequences), or the lines of a JSONL file, each a chat
// request ({"messages": [...], "tools": [...]}, rendered with the model's
// chat template, as the BFCL-style bfcl_calib.jsonl of the MLPerf data) or
// {"text": "..."}; at most limit lines.
func calibPrompts(model, src string, ownTokens, limit int, log zerolog.Logger) ([][]int32, error) {
	if src == "none" {
		return nil, nil
	}
	e, err := engine.Load(model, engine.Options{KVType: tensor.F16, Log: log})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	tok := e.Tokenizer()
	if src == "own" {
		return ownText(e, ownTokens)
	}
	v := tok.Vocab()
	tokenText := func(id int32) string {
		if id < 0 || int(id) >= len(v.Tokens) {
			return ""
		}
		return v.Tokens[id]
	}
	tpl, err := chat.NewTemplate(v.ChatTemplate, tokenText(v.BOS), tokenText(v.EOS))
	if err != nil {
		return nil, fmt.Errorf("--calib %s: %w", src, err)
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("--calib: %w", err)
	}
	defer f.Close()
	var prompts [][]int32
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan() && len(prompts) < limit; line++ {
		raw := sc.Bytes()
		if len(raw) == 0 {
			continue
		}
		var probe struct {
			Text     *string         `json:"text"`
			Messages json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("--calib %s:%d: %w", src, line, err)
		}
		switch {
		case probe.Text != nil:
			prompts = append(prompts, tok.Encode(*probe.Text, true, false))
		case probe.Messages != nil:
			var req chat.Request
			if err := json.Unmarshal(raw, &req); err != nil {
				return nil, fmt.Errorf("--calib %s:%d: %w", src, line, err)
			}
			text, err := tpl.Render(req)
			if err != nil {
				return nil, fmt.Errorf("--calib %s:%d: %w", src, line, err)
			}
			prompts = append(prompts, tok.Encode(text, false, true))
		default:
			return nil, fmt.Errorf("--calib %s:%d: want {\"messages\": [...]} or {\"text\": \"...\"}", src, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--calib %s: %w", src, err)
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("--calib %s: no prompts", src)
	}
	return prompts, nil
}

// ownText samples n tokens of the model's own text (temperature 1, fixed
// seeds), in four sequences that start at BOS.
func ownText(e *engine.Engine, n int) ([][]int32, error) {
	tok := e.Tokenizer()
	start := tok.Encode("", true, false)
	if len(start) == 0 {
		start = tok.Encode("The", false, false)
	}
	const seqs = 4
	var out [][]int32
	for s := 0; s < seqs; s++ {
		res, err := e.Generate(context.Background(), engine.Request{Prompt: start, MaxTokens: max(1, n/seqs), IgnoreEOS: true,
			Sample: sample.Params{Temperature: 1, Seed: uint64(s + 1)}}, func(engine.Token) error { return nil })
		if err != nil {
			return nil, fmt.Errorf("calibration text: %w", err)
		}
		out = append(out, append(append([]int32(nil), start...), res.Tokens...))
	}
	return out, nil
}
