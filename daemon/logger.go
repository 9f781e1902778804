package daemon

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
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
	lvl, err := parseLevel(level)
	if err != nil {
		return zerolog.Nop(), err
	}
	w, err = formatWriter(w, format)
	if err != nil {
		return zerolog.Nop(), err
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// NewSwitchableLogger is NewLogger whose level can be changed later through
// the returned LevelSwitch (a config reload), for every copy of the logger
// already handed out.
func NewSwitchableLogger(w io.Writer, format LogFormat, level string) (zerolog.Logger, *LevelSwitch, error) {
	sw := &LevelSwitch{}
	if err := sw.Set(level); err != nil {
		return zerolog.Nop(), nil, err
	}
	w, err := formatWriter(w, format)
	if err != nil {
		return zerolog.Nop(), nil, err
	}
	lw, ok := w.(zerolog.LevelWriter)
	if !ok {
		lw = zerolog.LevelWriterAdapter{Writer: w}
	}
	// The logger itself lets everything through; the writer filters, so a
	// level change reaches loggers derived before it.
	log := zerolog.New(levelFilter{w: lw, sw: sw}).Level(zerolog.TraceLevel).With().Timestamp().Logger()
	return log, sw, nil
}

// LevelSwitch holds the level a switchable logger writes at.
type LevelSwitch struct{ level atomic.Int32 }

// Set changes the level ("debug", "info", "warn", "error").
func (s *LevelSwitch) Set(level string) error {
	lvl, err := parseLevel(level)
	if err != nil {
		return err
	}
	s.level.Store(int32(lvl))
	return nil
}

// Level is the level in force.
func (s *LevelSwitch) Level() zerolog.Level { return zerolog.Level(s.level.Load()) }

type levelFilter struct {
	w  zerolog.LevelWriter
	sw *LevelSwitch
}

func (f levelFilter) Write(p []byte) (int, error) { return f.w.Write(p) }

func (f levelFilter) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	if l < f.sw.Level() && l != zerolog.NoLevel {
		return len(p), nil
	}
	return f.w.WriteLevel(l, p)
}

func parseLevel(level string) (zerolog.Level, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.NoLevel, fmt.Errorf("log.level: %q is not one of debug, info, warn, error", level)
	}
	return lvl, nil
}

func formatWriter(w io.Writer, format LogFormat) (io.Writer, error) {
	switch format {
	case LogAuto:
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			format = LogConsole
		} else {
			format = LogJSON
		}
	case LogJSON, LogConsole:
	default:
		return nil, fmt.Errorf("log.format: %q is not one of auto, json, console", format)
	}
	if format == LogConsole {
		return zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}, nil
	}
	return w, nil
}
