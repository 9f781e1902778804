package speculative

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Config are the speculative decoding parameters, the one type for them
// wherever they are set: the config file's draft section (yaml), the
// status page and /status.json (json), run's --draft flags, and the engine
// (engine.Options.Draft, Engine.SetDraft). DefaultConfig has their
// defaults and Problems their validation; a new parameter is a field here
// with its wire names.
type Config struct {
	Mode        string   `yaml:"mode" json:"mode"`                 // "off", "linear" (a chain: top_k 1) or "tree"
	Steps       int      `yaml:"steps" json:"steps"`               // draft depth
	TopK        int      `yaml:"top_k" json:"top_k"`               // candidates kept per depth (tree)
	VerifyNodes int      `yaml:"verify_nodes" json:"verify_nodes"` // draft nodes verified in one target forward pass
	Drafters    []string `yaml:"drafters" json:"drafters"`         // "mtp" (the model's MTP head), "suffix" (model-free)
}

// DefaultConfig is the record run's tree: 8 steps, top-2, 16 nodes, both
// drafters, off until asked for.
func DefaultConfig() Config {
	return Config{Mode: "off", Steps: 8, TopK: 2, VerifyNodes: 16, Drafters: []string{"mtp", "suffix"}}
}

// String is the parameters in short: "off", or mode steps/top_k/nodes and
// the drafters, e.g. "tree 8/2/16 mtp,suffix".
func (c Config) String() string {
	if !c.Enabled() {
		return "off"
	}
	return fmt.Sprintf("%s %d/%d/%d %s", c.Mode, c.Steps, c.TopK, c.VerifyNodes, strings.Join(c.Drafters, ","))
}

// Equal reports whether c and o are the same parameters.
func (c Config) Equal(o Config) bool {
	return c.Mode == o.Mode && c.Steps == o.Steps && c.TopK == o.TopK && c.VerifyNodes == o.VerifyNodes &&
		slices.Equal(c.Drafters, o.Drafters)
}

// Clone is c with its own Drafters.
func (c Config) Clone() Config {
	c.Drafters = slices.Clone(c.Drafters)
	return c
}

// Enabled reports whether drafting is on.
func (c Config) Enabled() bool { return c.Mode != "" && c.Mode != "off" }

// unset is the zero value (and "off" with nothing else set): off, as the
// engine's Options take it, with no parameters to check.
func (c Config) unset() bool {
	return !c.Enabled() && c.Steps == 0 && c.TopK == 0 && c.VerifyNodes == 0 && len(c.Drafters) == 0
}

// Problem is a bad parameter: its key as the config file spells it
// ("draft.top_k", "draft.drafters[1]") and what is wrong.
type Problem struct {
	Key, Msg string
}

func (p Problem) Error() string { return p.Key + ": " + p.Msg }

// Problems lists every bad parameter. The parameters of a config that is
// off are checked too, so that a mistake is found before drafting is
// switched on; only the zero value (off, nothing set) has none to check.
func (c Config) Problems() []Problem {
	if c.unset() {
		return nil
	}
	var ps []Problem
	bad := func(key, format string, args ...any) { ps = append(ps, Problem{key, fmt.Sprintf(format, args...)}) }
	between := func(key string, v, lo, hi int) {
		if v < lo || v > hi {
			bad(key, "must be between %d and %d, got %d", lo, hi, v)
		}
	}
	switch c.Mode {
	case "", "off", "linear", "tree":
	default:
		bad("draft.mode", "%q is not one of off, linear, tree", c.Mode)
	}
	between("draft.steps", c.Steps, 1, 64)
	between("draft.top_k", c.TopK, 1, 32)
	between("draft.verify_nodes", c.VerifyNodes, 1, 1024)
	if c.Enabled() && len(c.Drafters) == 0 {
		bad("draft.drafters", "needs at least one of mtp, suffix when draft.mode is %s", c.Mode)
	}
	for i, d := range c.Drafters {
		key := fmt.Sprintf("draft.drafters[%d]", i)
		if d != "mtp" && d != "suffix" {
			bad(key, "%q is not one of mtp, suffix", d)
		} else if slices.Index(c.Drafters, d) < i {
			bad(key, "%q is listed twice", d)
		}
	}
	return ps
}

// Validate returns the first of Problems, nil when there is none.
func (c Config) Validate() error {
	if ps := c.Problems(); len(ps) > 0 {
		return ps[0]
	}
	return nil
}

// ErrNoMTPHead is what drafting with only the MTP drafter on a model
// without an MTP head fails with (CheckModel).
var ErrNoMTPHead = errors.New("the model has no MTP head")

// CheckModel says whether c can draft on a model with an MTP head or
// without one (hasMTP): the MTP drafter needs the head, and is skipped on
// a model without one as long as another drafter is listed.
func (c Config) CheckModel(hasMTP bool) error {
	if !c.Enabled() || hasMTP || slices.Contains(c.Drafters, "suffix") {
		return nil
	}
	return fmt.Errorf("draft.drafters: %s needs the model's MTP head, and %w; add suffix to draft without one", strings.Join(c.Drafters, ", "), ErrNoMTPHead)
}
