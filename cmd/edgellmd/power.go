package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/daemon"
	"github.com/edgellmd/edgellmd/power"
)

func cmdPower(args []string, stdout io.Writer, log zerolog.Logger) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: power needs status or pin", errUsage)
	}
	if isHelp(args[0]) {
		return groupHelp(stdout, "power")
	}
	sub := args[0]
	if sub != "status" && sub != "pin" {
		return fmt.Errorf("%w: unknown power command %q (want status or pin)", errUsage, sub)
	}
	fs := newFlagSet("power " + sub)
	root := fs.String("root", "/", "filesystem root to read the board's files under (tests use a fake tree)")
	cfgPath := fs.String("c", daemon.DefaultConfigPath, "config file whose power.pin and power.jetson_clocks are the defaults (absent file: MAXN, no jetson_clocks)")
	mode := fs.String("mode", "MAXN", "power mode to pin, by name as nvpmodel lists it (overrides power.pin)")
	clocks := fs.Bool("jetson-clocks", false, "run jetson_clocks once the mode is right (overrides power.jetson_clocks)")
	asJSON := fs.Bool("json", false, "print the status as JSON (status)")
	timeout := fs.Duration("timeout", power.DefaultCommandTimeout, "time limit for each nvpmodel / jetson_clocks run")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg, err := daemon.LoadConfig(*cfgPath)
	switch {
	case errors.Is(err, iofs.ErrNotExist) && !set["c"]:
		// No config file: the flags' defaults stand.
	case err != nil:
		return err
	default:
		if !set["mode"] {
			*mode = cfg.Power.Pin
		}
		if !set["jetson-clocks"] {
			*clocks = cfg.Power.JetsonClocks
		}
	}
	ctl, err := power.New(power.Options{Root: *root, Mode: *mode, JetsonClocks: *clocks,
		CommandTimeout: *timeout, Logger: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*(*timeout)+time.Second)
	defer cancel()
	if sub == "pin" {
		res, err := ctl.Pin(ctx)
		var reboot *power.RebootRequiredError
		if errors.As(err, &reboot) {
			return fmt.Errorf("refusing to switch the power mode: %w", err)
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, res)
		return nil
	}
	st, err := ctl.Check(ctx)
	if *asJSON {
		if encErr := json.NewEncoder(stdout).Encode(st); encErr != nil {
			return encErr
		}
		return err
	}
	if err != nil {
		return err
	}
	if !st.Jetson {
		fmt.Fprintln(stdout, "not a Jetson: no power mode to manage")
		return nil
	}
	fmt.Fprintf(stdout, "board: %s (L4T %s)\n", st.Model, st.L4T)
	if st.Mode != nil {
		fmt.Fprintf(stdout, "mode: %s\n", st.Mode)
	}
	if st.Target != nil {
		fmt.Fprintf(stdout, "pinned mode: %s, pinned: %v\n", st.Target, st.Pinned)
	}
	return nil
}
