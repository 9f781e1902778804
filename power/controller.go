package power

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// DefaultCommandTimeout bounds each nvpmodel or jetson_clocks run.
const DefaultCommandTimeout = 30 * time.Second

// Options configure a Controller. The zero value reports only: it pins
// nothing and runs nothing but queries.
type Options struct {
	// Root is the filesystem root Detect reads ("" means "/").
	Root string
	// Mode is the power mode to pin, by name ("MAXN"); "" pins nothing.
	Mode string
	// JetsonClocks runs jetson_clocks once the mode is right, to lock the
	// clocks at the mode's maximum. Its effect does not survive a reboot or a
	// mode change, so it runs on the first Pin of a process and after every
	// mode switch.
	JetsonClocks bool
	// Repin lets Watch switch the mode back when it drifted; without it
	// Watch only reports.
	Repin bool
	// Path is the PATH-style list searched for nvpmodel and jetson_clocks
	// ("" means the process's $PATH).
	Path string
	// CommandTimeout bounds each command (0 means DefaultCommandTimeout).
	CommandTimeout time.Duration
	// Logger receives what the controller does (the zero Logger discards).
	Logger zerolog.Logger
}

// Status is what a Controller knows, for `edgellmd power status`, the status
// page and the metrics. It is a copy: later checks do not change it.
type Status struct {
	Jetson bool   `json:"jetson"`
	Model  string `json:"model,omitempty"`
	SoC    string `json:"soc,omitempty"`
	Family string `json:"family,omitempty"`
	L4T    string `json:"l4t,omitempty"`
	// Mode is the power mode nvpmodel reported at LastCheck.
	Mode *PowerMode `json:"mode,omitempty"`
	// PinnedMode is the configured mode name; Target is that name resolved on
	// this board.
	PinnedMode string     `json:"pinned_mode,omitempty"`
	Target     *PowerMode `json:"target,omitempty"`
	// Modes are the board's power modes and DefaultMode the one it boots
	// in, as nvpmodel -p lists them (once a mode is configured).
	Modes       []PowerMode `json:"modes,omitempty"`
	DefaultMode *PowerMode  `json:"default_mode,omitempty"`
	// Pinned says Mode is Target.
	Pinned bool `json:"pinned"`
	// JetsonClocksRun says this process ran jetson_clocks after the mode was
	// last set.
	JetsonClocksRun bool `json:"jetson_clocks_run"`
	// Drifted says the last check found the mode moved off Target (it stays
	// set after a successful re-pin until a check finds the mode right).
	Drifted bool `json:"drifted"`
	// Drifts counts the times a check found the mode moved off Target;
	// Repins the times it was switched back.
	Drifts int `json:"drifts"`
	Repins int `json:"repins"`
	// RebootRequired says nvpmodel refused to reach Target without a reboot.
	RebootRequired bool `json:"reboot_required,omitempty"`
	// LastError is the error of the last check or pin, "" once one succeeds.
	LastError string    `json:"last_error,omitempty"`
	LastCheck time.Time `json:"last_check,omitzero"`
	// Note explains a controller that does nothing (not a Jetson, no mode set).
	Note string `json:"note,omitempty"`
}

// PinResult says what Pin did.
type PinResult struct {
	// Skipped is set when there was nothing to do here (Note says why).
	Skipped bool   `json:"skipped,omitempty"`
	Note    string `json:"note,omitempty"`
	// From is the mode found, Target the one wanted.
	From   *PowerMode `json:"from,omitempty"`
	Target *PowerMode `json:"target,omitempty"`
	// Changed says nvpmodel -m was run (and the mode is now Target).
	Changed bool `json:"changed"`
	// JetsonClocks says jetson_clocks was run.
	JetsonClocks bool `json:"jetson_clocks"`
}

func (r PinResult) String() string {
	switch {
	case r.Skipped:
		return r.Note
	case r.Target == nil:
		return "nothing done"
	}
	var s string
	if r.Changed {
		s = fmt.Sprintf("switched power mode from %s to %s", r.From, r.Target)
	} else {
		s = fmt.Sprintf("power mode already %s", r.Target)
	}
	if r.JetsonClocks {
		s += "; ran jetson_clocks"
	}
	return s
}

// RebootRequiredError is returned when nvpmodel says the switch to Target
// needs a reboot. edgellmd never answers that prompt: the operator does.
type RebootRequiredError struct {
	From, Target PowerMode
	Output       string // what nvpmodel printed
}

func (e *RebootRequiredError) Error() string {
	return fmt.Sprintf("nvpmodel says switching from %s to %s needs a reboot: run `sudo nvpmodel -m %d` and reboot (it asks; answer YES), then restart edgellmd (nvpmodel said: %s)",
		e.From, e.Target, e.Target.ID, strings.Join(strings.Fields(e.Output), " "))
}

// Controller pins a Jetson's power mode and watches it. Its methods are safe
// for concurrent use; commands run one at a time.
type Controller struct {
	opts  Options
	log   zerolog.Logger
	cmds  commandRunner
	board Board
	now   func() time.Time

	opMu          sync.Mutex // held while commands run; guards the fields below
	modes         *modeList  // from nvpmodel -p, once read
	clocksLocked  bool       // jetson_clocks ran since the mode was last set
	rebootBlocked bool       // switching to the target needs a reboot: do not retry
	lastMode      *PowerMode // mode found by the previous drift check

	mu     sync.Mutex // guards status
	status Status

	afterCheck func(Status) // test hook: called after each drift check
}

// New detects the board under opts.Root and returns a controller for it.
// It runs no command.
func New(opts Options) (*Controller, error) {
	if opts.Root == "" {
		opts.Root = "/"
	}
	if opts.Path == "" {
		opts.Path = os.Getenv("PATH")
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = DefaultCommandTimeout
	}
	opts.Mode = strings.TrimSpace(opts.Mode)
	board, err := Detect(opts.Root)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		opts:  opts,
		log:   opts.Logger.With().Str("component", "power").Logger(),
		cmds:  commandRunner{path: opts.Path, timeout: opts.CommandTimeout},
		board: board,
		now:   time.Now,
	}
	c.status = Status{
		Jetson:     board.Jetson,
		Model:      board.Model,
		SoC:        board.SoC,
		Family:     board.Family,
		L4T:        board.L4T,
		PinnedMode: opts.Mode,
	}
	switch {
	case !board.Jetson:
		c.status.Note = "not a Jetson: power mode pinning is off"
	case opts.Mode == "":
		c.status.Note = "no power mode configured: reporting only"
	}
	return c, nil
}

// Board returns what New detected.
func (c *Controller) Board() Board { return c.board }

// Status returns a copy of what the controller knows now.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Check asks nvpmodel for the current mode (and the board's modes, to
// resolve the configured one) and returns the refreshed status. It changes
// nothing. Off a Jetson it runs nothing.
func (c *Controller) Check(ctx context.Context) (Status, error) {
	if !c.board.Jetson {
		return c.Status(), nil
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	_, _, err := c.currentLocked(ctx)
	c.finish(err)
	return c.Status(), err
}

// Pin makes the current mode the configured one: nvpmodel -m only when the
// mode differs, then jetson_clocks if asked (see Options.JetsonClocks). A
// switch that needs a reboot is refused with a *RebootRequiredError. Off a
// Jetson, or with no mode configured, it logs and returns a skipped result.
func (c *Controller) Pin(ctx context.Context) (PinResult, error) {
	if note := c.idleNote(); note != "" {
		c.log.Info().Msg(note)
		return PinResult{Skipped: true, Note: note}, nil
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	res, err := c.pinLocked(ctx)
	c.finish(err)
	return res, err
}

// idleNote says why the controller has nothing to pin, or "".
func (c *Controller) idleNote() string {
	if !c.board.Jetson {
		return "not a Jetson: power mode pinning skipped"
	}
	if c.opts.Mode == "" {
		return "no power mode configured: pinning skipped"
	}
	return ""
}

// pinLocked does Pin's work; the caller holds opMu.
func (c *Controller) pinLocked(ctx context.Context) (PinResult, error) {
	target, cur, err := c.currentLocked(ctx)
	if err != nil {
		return PinResult{}, err
	}
	res := PinResult{From: &cur, Target: target}
	if cur.ID != target.ID {
		if err := c.switchLocked(ctx, cur, *target); err != nil {
			return res, err
		}
		_, after, err := c.currentLocked(ctx)
		if err != nil {
			return res, fmt.Errorf("after nvpmodel -m %d: %w", target.ID, err)
		}
		if after.ID != target.ID {
			return res, fmt.Errorf("nvpmodel -m %d ran without error but nvpmodel -q reports %s", target.ID, after)
		}
		res.Changed = true
		c.log.Info().Str("from", cur.String()).Str("to", target.String()).Msg("switched power mode")
	} else {
		c.log.Info().Str("mode", cur.String()).Msg("power mode already pinned")
	}
	if c.opts.JetsonClocks && !c.clocksLocked {
		if _, err := c.cmds.run(ctx, "jetson_clocks"); err != nil {
			return res, fmt.Errorf("lock clocks with jetson_clocks: %w", err)
		}
		c.clocksLocked = true
		res.JetsonClocks = true
		c.setStatus(func(s *Status) { s.JetsonClocksRun = true })
		c.log.Info().Msg("ran jetson_clocks")
	}
	return res, nil
}

// switchLocked runs nvpmodel -m for target and reads its answer.
func (c *Controller) switchLocked(ctx context.Context, from, target PowerMode) error {
	out, err := c.cmds.run(ctx, "nvpmodel", "-m", strconv.Itoa(target.ID))
	if needsReboot(out) {
		c.rebootBlocked = true
		c.setStatus(func(s *Status) { s.RebootRequired = true })
		return &RebootRequiredError{From: from, Target: target, Output: out}
	}
	if err != nil {
		return fmt.Errorf("switch power mode to %s: %w", target, err)
	}
	if errs := nvpmErrors(out); len(errs) > 0 {
		return fmt.Errorf("switch power mode to %s: nvpmodel -m %d reported: %s", target, target.ID, strings.Join(errs, "; "))
	}
	c.clocksLocked = false // a mode switch resets the clocks
	c.setStatus(func(s *Status) { s.JetsonClocksRun = false })
	return nil
}

// currentLocked resolves the target (nil when no mode is configured) and
// queries the current mode, recording both in the status. The current mode
// is recorded even when the configured name does not resolve.
func (c *Controller) currentLocked(ctx context.Context) (*PowerMode, PowerMode, error) {
	target, terr := c.targetLocked(ctx)
	out, err := c.cmds.run(ctx, "nvpmodel", "-q")
	cur, perr := parseQuery(out)
	switch {
	case perr != nil && terr != nil:
		return nil, PowerMode{}, terr
	case perr != nil && err != nil:
		return target, PowerMode{}, c.toolError("query power mode", err)
	case perr != nil:
		return target, PowerMode{}, perr
	}
	if target != nil && cur.ID == target.ID {
		c.rebootBlocked = false
	}
	c.setStatus(func(s *Status) {
		s.Target = target
		s.Mode = &cur
		s.Pinned = target != nil && cur.ID == target.ID
		if s.Pinned {
			s.RebootRequired = false
		}
		s.LastCheck = c.now()
	})
	return target, cur, terr
}

// targetLocked resolves the configured mode name on this board, listing its
// modes with nvpmodel -p the first time. No configured mode is (nil, nil).
func (c *Controller) targetLocked(ctx context.Context) (*PowerMode, error) {
	if c.opts.Mode == "" {
		return nil, nil
	}
	if c.modes == nil {
		out, err := c.cmds.run(ctx, "nvpmodel", "-p", "--verbose")
		if err != nil {
			return nil, c.toolError("list power modes", err)
		}
		l, err := parseModes(out)
		if err != nil {
			return nil, err
		}
		c.modes = &l
		c.setStatus(func(s *Status) {
			s.Modes = append([]PowerMode(nil), l.Modes...)
			s.DefaultMode = l.Default
		})
	}
	t, err := resolveMode(c.opts.Mode, c.modes.Modes)
	if err != nil {
		return nil, fmt.Errorf("power.mode: %w", err)
	}
	return &t, nil
}

// toolError says what to do when nvpmodel itself is missing.
func (c *Controller) toolError(what string, err error) error {
	if errors.Is(err, errToolMissing) {
		return fmt.Errorf("%s: %w (it comes with Jetson Linux's nvidia-l4t-nvpmodel package; without it the mode cannot be pinned)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// finish records the outcome of a check or pin.
func (c *Controller) finish(err error) {
	c.setStatus(func(s *Status) {
		s.LastError = ""
		if err != nil {
			s.LastError = err.Error()
		}
	})
}

func (c *Controller) setStatus(f func(*Status)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.status)
}
