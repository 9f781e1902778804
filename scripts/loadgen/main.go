//go:build ignore

// loadgen sends N concurrent streaming /v1/completions requests (distinct
// prompts, temperature 0, ignore_eos, max_tokens -gen) to any OpenAI-style
// server and prints the aggregate output tok/s and the TPOT and TTFT
// percentiles as one JSON line. scripts/compare-parallel.sh runs it against
// edgellmd serve and llama-server --parallel N:
//
//	go run scripts/loadgen/main.go -url http://127.0.0.1:18002 -n 4 -gen 64
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:18002", "")
	n := flag.Int("n", 1, "concurrent requests")
	gen := flag.Int("gen", 64, "tokens per request")
	words := flag.Int("words", 40, "prompt words")
	off := flag.Int("offset", 0, "prompt variety offset")
	flag.Parse()
	model := "m"
	if r, err := http.Get(*url + "/v1/models"); err == nil {
		var ms struct{ Data []struct{ ID string } }
		if json.NewDecoder(r.Body).Decode(&ms) == nil && len(ms.Data) > 0 {
			model = ms.Data[0].ID
		}
		r.Body.Close()
	}
	var mu sync.Mutex
	var ttft, tpot []float64
	total := 0
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var sb strings.Builder
			for w := 0; w < *words; w++ {
				fmt.Fprintf(&sb, "word%d ", ((i+*off)*7919+w*31)%997)
			}
			body, _ := json.Marshal(map[string]any{"model": model, "prompt": sb.String(), "max_tokens": *gen, "temperature": 0,
				"ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}})
			t0 := time.Now()
			resp, err := http.Post(*url+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			var times []time.Time
			usage := 0
			for sc.Scan() {
				l := sc.Text()
				if !strings.HasPrefix(l, "data: ") || l == "data: [DONE]" {
					continue
				}
				var ev struct {
					Choices []struct{ Text string } `json:"choices"`
					Usage   *struct {
						CompletionTokens int `json:"completion_tokens"`
					} `json:"usage"`
				}
				if json.Unmarshal([]byte(l[6:]), &ev) != nil {
					continue
				}
				if ev.Usage != nil && ev.Usage.CompletionTokens > 0 {
					usage = ev.Usage.CompletionTokens
				}
				if len(ev.Choices) > 0 && ev.Choices[0].Text != "" {
					times = append(times, time.Now())
				}
			}
			if len(times) == 0 {
				fmt.Fprintln(os.Stderr, "no tokens", resp.Status)
				return
			}
			toks := usage
			if toks == 0 {
				toks = len(times)
			}
			mu.Lock()
			total += toks
			ttft = append(ttft, float64(times[0].Sub(t0).Milliseconds()))
			if toks > 1 {
				tpot = append(tpot, float64(times[len(times)-1].Sub(times[0]).Microseconds())/1000/float64(toks-1))
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	pct := func(v []float64, p float64) float64 {
		if len(v) == 0 {
			return 0
		}
		sort.Float64s(v)
		return v[int(p*float64(len(v)-1)+0.5)]
	}
	out, _ := json.Marshal(map[string]any{"n": *n, "tokens": total, "wall_s": wall, "agg_tok_s": float64(total) / wall,
		"tpot_ms_p50": pct(tpot, 0.5), "tpot_ms_p90": pct(tpot, 0.9), "ttft_ms_p50": pct(ttft, 0.5)})
	fmt.Println(string(out))
}
