package power

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// PowerMode is one nvpmodel power mode: its id (what `nvpmodel -m` takes)
// and its name (what the config file and people use).
type PowerMode struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

func (m PowerMode) String() string { return fmt.Sprintf("%s (id %d)", m.Name, m.ID) }

// modeList is what `nvpmodel -p --verbose` says the board offers.
type modeList struct {
	Modes   []PowerMode
	Default *PowerMode // the boot default (PM_CONFIG), when printed
}

// The line formats jetson-stats (jtop) parses too:
//
//	NVPM VERB: POWER_MODEL: ID=2 NAME=MAXN_SUPER
//	NVPM VERB: PM_CONFIG: DEFAULT=25W(1)
var (
	powerModelLine = regexp.MustCompile(`POWER_MODEL: ID=([0-9]+) NAME=(\S+)`)
	pmConfigLine   = regexp.MustCompile(`PM_CONFIG: DEFAULT=(\S+?)\(([0-9]+)\)`)
)

// parseModes reads the output of `nvpmodel -p --verbose`.
func parseModes(out string) (modeList, error) {
	var l modeList
	seen := map[int]bool{}
	for _, line := range strings.Split(out, "\n") {
		if m := powerModelLine.FindStringSubmatch(line); m != nil {
			id, err := strconv.Atoi(m[1])
			if err != nil {
				return modeList{}, fmt.Errorf("nvpmodel -p: mode id in %q: %w", strings.TrimSpace(line), err)
			}
			if seen[id] {
				return modeList{}, fmt.Errorf("nvpmodel -p: mode id %d listed twice", id)
			}
			seen[id] = true
			l.Modes = append(l.Modes, PowerMode{ID: id, Name: m[2]})
			continue
		}
		if m := pmConfigLine.FindStringSubmatch(line); m != nil {
			id, err := strconv.Atoi(m[2])
			if err != nil {
				return modeList{}, fmt.Errorf("nvpmodel -p: default mode in %q: %w", strings.TrimSpace(line), err)
			}
			l.Default = &PowerMode{ID: id, Name: m[1]}
		}
	}
	if len(l.Modes) == 0 {
		return modeList{}, fmt.Errorf("nvpmodel -p --verbose listed no \"POWER_MODEL: ID=<n> NAME=<name>\" lines; it said:\n%s", clip(out))
	}
	return l, nil
}

// parseQuery reads the output of `nvpmodel -q`: optional warning lines, then
// "NV Power Mode: <NAME>" and the mode id on the next line. Error lines that
// follow the id (nvpmodel run without root cannot read some files) do not
// hide the answer.
func parseQuery(out string) (PowerMode, error) {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		_, name, ok := strings.Cut(line, "NV Power Mode:")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, " \t") {
			return PowerMode{}, fmt.Errorf("nvpmodel -q: bad mode name in %q", strings.TrimSpace(line))
		}
		for _, next := range lines[i+1:] {
			next = strings.TrimSpace(next)
			if next == "" {
				continue
			}
			id, err := strconv.Atoi(next)
			if err != nil || id < 0 {
				return PowerMode{}, fmt.Errorf("nvpmodel -q: expected the id of mode %s on the line after it, got %q", name, next)
			}
			return PowerMode{ID: id, Name: name}, nil
		}
		return PowerMode{}, fmt.Errorf("nvpmodel -q: no id after mode %s", name)
	}
	return PowerMode{}, fmt.Errorf("nvpmodel -q printed no \"NV Power Mode:\" line; it said:\n%s", clip(out))
}

// resolveMode finds the configured mode name among the board's modes: an
// exact (case-insensitive) match, else the single mode named name + "_...",
// so that "MAXN" is MAXN_SUPER on an Orin Nano Super.
func resolveMode(name string, modes []PowerMode) (PowerMode, error) {
	want := strings.TrimSpace(name)
	if want == "" {
		return PowerMode{}, fmt.Errorf("power mode name is empty")
	}
	var exact, prefixed []PowerMode
	for _, m := range modes {
		switch {
		case strings.EqualFold(m.Name, want):
			exact = append(exact, m)
		case len(m.Name) > len(want)+1 && strings.EqualFold(m.Name[:len(want)+1], want+"_"):
			prefixed = append(prefixed, m)
		}
	}
	switch {
	case len(exact) == 1:
		return exact[0], nil
	case len(exact) > 1:
		return PowerMode{}, fmt.Errorf("power mode %q matches %s: name one of them exactly", want, modeNames(exact))
	case len(prefixed) == 1:
		return prefixed[0], nil
	case len(prefixed) > 1:
		return PowerMode{}, fmt.Errorf("power mode %q is ambiguous, it could be %s: name one of them exactly", want, modeNames(prefixed))
	}
	return PowerMode{}, fmt.Errorf("power mode %q is not one of this board's modes: %s", want, modeNames(modes))
}

func modeNames(modes []PowerMode) string {
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = m.String()
	}
	return strings.Join(s, ", ")
}

// needsReboot reports whether nvpmodel's answer to -m says the switch only
// takes effect after a reboot (it then asks "DO YOU WANT TO REBOOT NOW?").
func needsReboot(out string) bool {
	l := strings.ToLower(out)
	return strings.Contains(l, "reboot required") || strings.Contains(l, "want to reboot")
}

// nvpmErrors returns nvpmodel's "NVPM ERROR" lines, which it may print with a
// zero exit status.
func nvpmErrors(out string) []string {
	var errs []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "NVPM ERROR") {
			errs = append(errs, strings.TrimSpace(line))
		}
	}
	return errs
}

// clip keeps command output short enough for an error message or a log line.
func clip(out string) string {
	const max = 2000
	out = strings.TrimSpace(out)
	if len(out) > max {
		return out[:max] + " ..."
	}
	return out
}
