package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenRequest is the request format of testdata/gen (render.py's).
type goldenRequest struct {
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt *bool             `json:"add_generation_prompt"`
	Kwargs              map[string]any    `json:"kwargs"`
}

func loadGoldenRequest(t testing.TB, path string) Request {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenRequest
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	req := Request{Messages: g.Messages, Tools: g.Tools, AddGenerationPrompt: true, Kwargs: g.Kwargs}
	if g.AddGenerationPrompt != nil {
		req.AddGenerationPrompt = *g.AddGenerationPrompt
	}
	return req
}

func loadTemplate(t testing.TB, model string) *Template {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", model, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseTokenizerConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := NewTemplate(cfg.ChatTemplate, cfg.BOS, cfg.EOS)
	if err != nil {
		t.Fatalf("%s: %v", model, err)
	}
	return tpl
}

func TestRenderGoldens(t *testing.T) {
	reqs, err := filepath.Glob("testdata/render/*.request.json")
	if err != nil || len(reqs) == 0 {
		t.Fatalf("no requests: %v", err)
	}
	for _, model := range []string{"qwen3", "qwen35"} {
		tpl := loadTemplate(t, model)
		for _, path := range reqs {
			name := strings.TrimSuffix(filepath.Base(path), ".request.json")
			t.Run(model+"/"+name, func(t *testing.T) {
				req := loadGoldenRequest(t, path)
				if err := Validate(req); err != nil {
					t.Fatalf("Validate: %v", err)
				}
				want, err := os.ReadFile(filepath.Join("testdata/render", name+"."+model+".txt"))
				if err != nil {
					t.Fatal(err)
				}
				got, err := tpl.Render(req)
				if err != nil {
					t.Fatalf("Render: %v", err)
				}
				if got != string(want) {
					t.Errorf("render differs from golden at byte %d:\n got: %q\nwant: %q", firstDiff(got, string(want)), around(got, firstDiff(got, string(want))), around(string(want), firstDiff(got, string(want))))
				}
			})
		}
	}
}

func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func around(s string, i int) string {
	lo, hi := max(i-80, 0), min(i+80, len(s))
	return s[lo:hi]
}

// BenchmarkRender renders the longest golden request (an MLPerf agent turn
// with its tool results) with the Qwen3 template.
func BenchmarkRender(b *testing.B) {
	tpl := loadTemplate(b, "qwen3")
	data, err := os.ReadFile("testdata/render/mlperf_pytest6202_t9_nothink.request.json")
	if err != nil {
		b.Fatal(err)
	}
	var g goldenRequest
	if err := json.Unmarshal(data, &g); err != nil {
		b.Fatal(err)
	}
	req := Request{Messages: g.Messages, Tools: g.Tools, AddGenerationPrompt: true, Kwargs: g.Kwargs}
	b.ResetTimer()
	var n int
	for i := 0; i < b.N; i++ {
		out, err := tpl.Render(req)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
}

// FuzzRender: any request body that decodes and validates renders without
// a panic under both templates (an error, e.g. raise_exception, is fine).
func FuzzRender(f *testing.F) {
	for _, name := range []string{"edge_tool_arg_types", "edge_text_parts", "edge_think_in_content"} {
		data, err := os.ReadFile("testdata/render/" + name + ".request.json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	tpls := []*Template{loadTemplate(f, "qwen3"), loadTemplate(f, "qwen35")}
	f.Fuzz(func(t *testing.T, body string) {
		var g goldenRequest
		if json.Unmarshal([]byte(body), &g) != nil {
			return
		}
		req := Request{Messages: g.Messages, Tools: g.Tools, AddGenerationPrompt: true, Kwargs: g.Kwargs}
		if Validate(req) != nil {
			return
		}
		for _, tpl := range tpls {
			tpl.Render(req)
		}
	})
}
