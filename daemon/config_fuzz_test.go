package daemon

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzParseConfig: any input is either refused with an error or gives a
// valid config that survives a round trip through Encode.
func FuzzParseConfig(f *testing.F) {
	// Small seeds: the fuzzer minimises every new input, and a commented
	// 3 KB file keeps it minimising for a minute.
	var full bytes.Buffer
	if err := DefaultConfig().Encode(&full); err != nil {
		f.Fatal(err)
	}
	f.Add(full.Bytes())
	for _, s := range []string{
		"", "listen: :1\n", "draft: {mode: tree, drafters: [mtp, mtp]}\n", "cache:\n  max_bytes: 1.5GiB\n",
		"a: &x [1]\nb: *x\n", "model:\n  threads: 0x10\n", "power:\n  check_interval: 1h\n", "- 1\n",
		"api:\n  key: \"\\u0000\"\n", "log: {level: debug, format: console}\n", "model: {name: \"é 🦙\"}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("fuzz.yaml", data)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		var buf bytes.Buffer
		if err := cfg.Encode(&buf); err != nil {
			t.Fatalf("encode: %v", err)
		}
		back, err := ParseConfig("again.yaml", buf.Bytes())
		if err != nil {
			t.Fatalf("re-parse of\n%s\nfailed: %v", buf.Bytes(), err)
		}
		if !reflect.DeepEqual(back, cfg) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", cfg, back)
		}
	})
}
