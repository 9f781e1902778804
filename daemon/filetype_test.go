package daemon

import "testing"

// TestModelInfoPreset: the status page and /v1/models name a file by its
// quantization preset (general.file_type), as llama.cpp reports it.
func TestModelInfoPreset(t *testing.T) {
	info, err := modelInfo("../testdata/kquant/synth-kquant-Q4_K_M.gguf", "qwen35")
	if err != nil {
		t.Fatal(err)
	}
	if info.Quantization != "Q4_K_M" {
		t.Errorf("Quantization = %q, want Q4_K_M", info.Quantization)
	}
}
