package daemon

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// LogFormat says how log lines are written.
type LogFormat string

const (
	LogAuto    LogFormat = "auto"    // console on a terminal, JSON otherwise
	LogJSON    LogFormat = "json"    // one JSON object a line (journald, files)
	LogConsole LogFormat = "console" // human-readable, coloured
)

// NewLogger returns the one logger the process passes down. Level is a
// zerolog level name ("debug", "info", "warn", "error").
func NewLogger(w io.Writer, format LogFormat, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("log.level: %q is not one of debug, info, warn, error", level)
	}
	switch format {
	case LogAuto:
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			format = LogConsole
		} else {
			format = LogJSON
		}
	case LogJSON, LogConsole:
	default:
		return zerolog.Nop(), fmt.Errorf("log.format: %q is not one of auto, json, console", format)
	}
	if format == LogConsole {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
