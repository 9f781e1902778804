package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edgellmd/edgellmd/engine/speculative"
)

// SetDraft sets the speculative decoding parameters used from the next
// request on; a generation under way keeps the ones it started with. It may
// be called from any goroutine.
func (e *Engine) SetDraft(cfg speculative.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Enabled() && e.model.MTP() == nil && !slices.Contains(cfg.Drafters, "suffix") {
		return fmt.Errorf("draft.drafters: %s needs the model's MTP head, and this model has no MTP head; add suffix", strings.Join(cfg.Drafters, ", "))
	}
	c := cfg
	c.Drafters = append([]string(nil), cfg.Drafters...)
	e.draft.Store(&c)
	return nil
}

// Draft returns the speculative decoding parameters in force.
func (e *Engine) Draft() speculative.Config {
	if c := e.draft.Load(); c != nil {
		return *c
	}
	return speculative.Config{Mode: "off"}
}
