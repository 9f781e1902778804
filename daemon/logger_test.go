package daemon

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestLoggerJSONWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, LogAuto, "info")
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Str("model", "m.gguf").Msg("loaded")
	log.Debug().Msg("hidden")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	if line["model"] != "m.gguf" || line["message"] != "loaded" || line["level"] != "info" {
		t.Fatalf("unexpected line %v", line)
	}
}

func TestLoggerConsole(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, LogConsole, "debug")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Int("n", 3).Msg("hello")
	if s := buf.String(); !strings.Contains(s, "hello") || strings.HasPrefix(s, "{") {
		t.Fatalf("console output %q", s)
	}
}

func TestLoggerBadSettingsNameTheKey(t *testing.T) {
	if _, err := NewLogger(&bytes.Buffer{}, LogAuto, "loud"); err == nil || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("bad level: %v", err)
	}
	if _, err := NewLogger(&bytes.Buffer{}, "xml", "info"); err == nil || !strings.Contains(err.Error(), "log.format") {
		t.Fatalf("bad format: %v", err)
	}
}

// A level change reaches loggers derived before it (the reload path).
func TestSwitchableLoggerLevel(t *testing.T) {
	var buf bytes.Buffer
	log, sw, err := NewSwitchableLogger(&buf, LogJSON, "info")
	if err != nil {
		t.Fatal(err)
	}
	child := log.With().Str("component", "web").Logger()
	child.Debug().Msg("hidden-1")
	child.Info().Msg("shown-1")
	if err := sw.Set("warn"); err != nil {
		t.Fatal(err)
	}
	child.Info().Msg("hidden-2")
	child.Warn().Msg("shown-2")
	if err := sw.Set("debug"); err != nil {
		t.Fatal(err)
	}
	child.Debug().Msg("shown-3")
	if err := sw.Set("loud"); err == nil || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("bad level: %v", err)
	}
	out := buf.String()
	for _, s := range []string{"shown-1", "shown-2", "shown-3"} {
		if !strings.Contains(out, s) {
			t.Errorf("missing %s in %s", s, out)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Errorf("filtered line written: %s", out)
	}
}
