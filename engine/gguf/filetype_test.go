package gguf

import "testing"

// TestFileType reads the presets llama-quantize wrote into the files of
// testdata/kquant, and says nothing for a file without the key.
func TestFileType(t *testing.T) {
	for file, want := range map[string]string{
		"../../testdata/kquant/synth-kquant-Q4_K_M.gguf": "Q4_K_M",
		"../../testdata/kquant/synth-kquant-IQ4_XS.gguf": "IQ4_XS",
		"../../testdata/kquant/stories260K-Q3_K_M.gguf":  "Q3_K_M",
		"../../testdata/kquant/synth-kquant-Q6_K.gguf":   "Q6_K",
	} {
		f, err := Open(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.FileType(); got != want {
			t.Errorf("%s: FileType() = %q, want %q", file, got, want)
		}
		f.Close()
	}
	w := NewWriter()
	if err := w.AddKV("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	f, err := Parse("mem", writeBytes(t, w))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.FileType(); got != "" {
		t.Errorf("no general.file_type: FileType() = %q, want \"\"", got)
	}
}
