package engine

import (
	"github.com/edgellmd/edgellmd/engine/speculative"
)

// SetDraft sets the speculative decoding parameters used from the next
// request on; a generation under way keeps the ones it started with. It may
// be called from any goroutine.
func (e *Engine) SetDraft(cfg speculative.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
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
