package speculative

import (
	"flag"
	"strings"
)

// flagNames are the command-line names of the parameters (run and bench
// decode), by their config keys.
var flagNames = []struct{ key, flag string }{
	{"draft.mode", "draft"}, {"draft.steps", "draft-steps"}, {"draft.top_k", "draft-top-k"},
	{"draft.verify_nodes", "draft-nodes"}, {"draft.drafters", "drafters"},
}

// RegisterFlags adds the parameters' flags to fs (--draft, --draft-steps,
// --draft-top-k, --draft-nodes, --drafters), starting from c, which
// receives what they set. Check the result with Validate and FlagError.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Mode, "draft", c.Mode, "speculative decoding: off, linear or tree")
	fs.IntVar(&c.Steps, "draft-steps", c.Steps, "draft depth")
	fs.IntVar(&c.TopK, "draft-top-k", c.TopK, "draft candidates kept per depth (tree)")
	fs.IntVar(&c.VerifyNodes, "draft-nodes", c.VerifyNodes, "draft tree nodes verified in one forward pass")
	fs.Var((*draftersFlag)(&c.Drafters), "drafters", "comma-separated `list` of drafters: mtp (the model's MTP head), suffix (repeats from the context)")
}

// FlagError is err (from Validate or CheckModel) with the config keys it
// names (draft.steps) written as the flags that set them (--draft-steps).
func FlagError(err error) string {
	msg := err.Error()
	for _, n := range flagNames {
		msg = strings.ReplaceAll(msg, n.key, "--"+n.flag)
	}
	return msg
}

// draftersFlag is Config.Drafters as one comma-separated flag.
type draftersFlag []string

func (d *draftersFlag) String() string { return strings.Join(*d, ",") }

func (d *draftersFlag) Set(s string) error {
	*d = nil
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*d = append(*d, x)
		}
	}
	return nil
}
