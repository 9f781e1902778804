package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/daemon"
)

// cmdServe runs the daemon. Its own logger (to stdout, from the config's log
// section) replaces the command-line one.
func cmdServe(args []string, stdout io.Writer, _ zerolog.Logger) error {
	fs := newFlagSet("serve")
	configPath := fs.String("c", "", "config file (default "+daemon.DefaultConfigPath+", used when present; a file named here must exist)")
	var model string
	fs.StringVar(&model, "model", "", "model file (GGUF); overrides model.path (default: the bundled stories260K model)")
	fs.StringVar(&model, "m", "", "shorthand for --model")
	listen := fs.String("listen", "", "address to listen on, host:port; overrides listen (default 127.0.0.1:8001)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error; overrides log.level")
	device := fs.String("device", "", deviceUsage+"; overrides model.device (default auto)")
	check := fs.Bool("check-config", false, "check the config file, print the configuration in force (api.key hidden) and exit")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	override := func(c *daemon.Config) {
		if set["model"] || set["m"] {
			c.Model.Path = model
		}
		if set["listen"] {
			c.Listen = *listen
		}
		if set["log-level"] {
			c.Log.Level = *logLevel
		}
		if set["device"] {
			c.Model.Device = *device
		}
	}
	logOut := stdout
	if *check {
		logOut = io.Discard
	}
	d, err := daemon.New(daemon.Options{ConfigPath: *configPath, Override: override, LogOutput: logOut, Version: version})
	if err != nil {
		return err
	}
	if *check {
		cfg := d.Config()
		if cfg.API.Key != "" {
			cfg.API.Key = "(hidden)"
		}
		// Said as YAML comments, so that the output stays a config file.
		if path, read := d.ConfigFile(); read {
			fmt.Fprintf(stdout, "# %s checked: valid. The configuration in force (file, then flags):\n", path)
		} else {
			fmt.Fprintf(stdout, "# No config file checked: %s does not exist (name one with -c FILE).\n# The configuration in force is the defaults and flags:\n", path)
		}
		return cfg.Encode(stdout)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	return d.Run(context.Background(), sigs)
}
