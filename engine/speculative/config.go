package speculative

import (
	"fmt"
	"slices"
	"strings"
)

// Config are the speculative decoding parameters: the config file's draft
// section, and run's --draft flags.
type Config struct {
	Mode        string   // "off", "linear" (a chain: top_k 1) or "tree"
	Steps       int      // draft depth
	TopK        int      // candidates kept per depth (tree)
	VerifyNodes int      // draft nodes verified in one target forward pass
	Drafters    []string // "mtp" (the model's MTP head), "suffix" (model-free)
}

// DefaultConfig is the record run's tree: 8 steps, top-2, 16 nodes, off
// until asked for.
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

// Enabled reports whether drafting is on.
func (c Config) Enabled() bool { return c.Mode != "" && c.Mode != "off" }

// Validate names the first bad field as the config file spells it.
func (c Config) Validate() error {
	switch c.Mode {
	case "", "off", "linear", "tree":
	default:
		return fmt.Errorf("draft.mode: %q is not one of off, linear, tree", c.Mode)
	}
	if !c.Enabled() {
		return nil
	}
	if c.Steps < 1 || c.Steps > 64 {
		return fmt.Errorf("draft.steps: %d is outside [1, 64]", c.Steps)
	}
	if c.TopK < 1 || c.TopK > 32 {
		return fmt.Errorf("draft.top_k: %d is outside [1, 32]", c.TopK)
	}
	if c.VerifyNodes < 1 || c.VerifyNodes > 1024 {
		return fmt.Errorf("draft.verify_nodes: %d is outside [1, 1024]", c.VerifyNodes)
	}
	if len(c.Drafters) == 0 {
		return fmt.Errorf("draft.drafters: needs at least one of mtp, suffix when draft.mode is %s", c.Mode)
	}
	for i, d := range c.Drafters {
		if d != "mtp" && d != "suffix" {
			return fmt.Errorf("draft.drafters[%d]: %q is not one of mtp, suffix", i, d)
		}
		if slices.Index(c.Drafters, d) < i {
			return fmt.Errorf("draft.drafters[%d]: %q is listed twice", i, d)
		}
	}
	return nil
}
