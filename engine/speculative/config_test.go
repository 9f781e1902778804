package speculative

import (
	"encoding/json"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// One validation for every place the draft parameters come from: each bad
// field is named as the config file spells it, an off config's parameters
// are checked too, the zero value (off, nothing set) and the defaults pass.
func TestConfigProblems(t *testing.T) {
	def := DefaultConfig()
	with := func(f func(*Config)) Config { c := def.Clone(); f(&c); return c }
	for _, tc := range []struct {
		name string
		c    Config
		want []string // "key: message" of every problem
	}{
		{"zero value", Config{}, nil},
		{"off alone", Config{Mode: "off"}, nil},
		{"defaults", def, nil},
		{"tree", with(func(c *Config) { c.Mode = "tree" }), nil},
		{"mode", with(func(c *Config) { c.Mode = "mtp" }), []string{`draft.mode: "mtp" is not one of off, linear, tree`}},
		{"off with top_k 0", with(func(c *Config) { c.TopK = 0 }), []string{"draft.top_k: must be between 1 and 32, got 0"}},
		{"steps and nodes", with(func(c *Config) { c.Mode, c.Steps, c.VerifyNodes = "linear", 65, 5000 }),
			[]string{"draft.steps: must be between 1 and 64, got 65", "draft.verify_nodes: must be between 1 and 1024, got 5000"}},
		{"no drafters", with(func(c *Config) { c.Mode, c.Drafters = "tree", nil }), []string{"draft.drafters: needs at least one of mtp, suffix when draft.mode is tree"}},
		{"drafters", with(func(c *Config) { c.Drafters = []string{"mtp", "eagle", "mtp"} }),
			[]string{`draft.drafters[1]: "eagle" is not one of mtp, suffix`, `draft.drafters[2]: "mtp" is listed twice`}},
	} {
		var got []string
		for _, p := range tc.c.Problems() {
			got = append(got, p.Error())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: problems %q, want %q", tc.name, got, tc.want)
		}
		if err := tc.c.Validate(); (err == nil) != (len(tc.want) == 0) || err != nil && err.Error() != tc.want[0] {
			t.Errorf("%s: Validate = %v, want the first problem", tc.name, err)
		}
	}
}

// The MTP drafter alone needs a model with an MTP head; with suffix
// listed, or off, any model will do.
func TestConfigCheckModel(t *testing.T) {
	mtp := Config{Mode: "tree", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp"}}
	if err := mtp.CheckModel(false); !errors.Is(err, ErrNoMTPHead) || !strings.HasPrefix(err.Error(), "draft.drafters: mtp needs the model's MTP head") {
		t.Errorf("mtp alone without a head: %v", err)
	}
	both := mtp.Clone()
	both.Drafters = append(both.Drafters, "suffix")
	off := DefaultConfig()
	off.Drafters = []string{"mtp"}
	for _, c := range []Config{both, off} {
		if err := c.CheckModel(false); err != nil {
			t.Errorf("%s without a head: %v", c, err)
		}
	}
	if err := mtp.CheckModel(true); err != nil {
		t.Errorf("mtp with a head: %v", err)
	}
}

// The config file's and the status page's names of the parameters.
func TestConfigWireNames(t *testing.T) {
	c := Config{Mode: "tree", Steps: 6, TopK: 3, VerifyNodes: 24, Drafters: []string{"suffix"}}
	var fromYAML Config
	if err := yaml.Unmarshal([]byte("mode: tree\nsteps: 6\ntop_k: 3\nverify_nodes: 24\ndrafters: [suffix]\n"), &fromYAML); err != nil || !fromYAML.Equal(c) {
		t.Errorf("yaml: %+v, %v", fromYAML, err)
	}
	b, err := json.Marshal(c)
	if want := `{"mode":"tree","steps":6,"top_k":3,"verify_nodes":24,"drafters":["suffix"]}`; err != nil || string(b) != want {
		t.Errorf("json: %s, want %s", b, want)
	}
}

// run's flags fill the same type, from the defaults, and its errors name
// the flags.
func TestConfigFlags(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--draft", "tree", "--draft-steps", "4", "--drafters", "suffix, mtp"}); err != nil {
		t.Fatal(err)
	}
	if want := (Config{Mode: "tree", Steps: 4, TopK: 2, VerifyNodes: 16, Drafters: []string{"suffix", "mtp"}}); !c.Equal(want) {
		t.Fatalf("flags gave %+v, want %+v", c, want)
	}
	if err := fs.Parse([]string{"--draft-top-k", "0", "--drafters", "eagle"}); err != nil {
		t.Fatal(err)
	}
	ps := c.Problems()
	if len(ps) != 2 || FlagError(ps[0]) != "--draft-top-k: must be between 1 and 32, got 0" || FlagError(ps[1]) != `--drafters[0]: "eagle" is not one of mtp, suffix` {
		t.Fatalf("problems %v", ps)
	}
}
