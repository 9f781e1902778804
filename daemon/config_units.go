// Values with units: sizes ("8GiB") and durations ("30s") as the file
// writes them.

package daemon

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Size is a number of bytes, written in the file as "8GiB", "512MB" or a
// plain number of bytes.
type Size int64

// Binary size units.
const (
	KiB Size = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

var sizeUnits = []struct {
	name string
	mult float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	// Bare K, M, G, T are binary, as systemd reads them (MemoryMax=4G).
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1}, {"", 1},
}

// ParseSize reads "8GiB", "1.5 GB", "512MiB", "4G" (binary, as systemd),
// "1048576". Units are case-insensitive.
func ParseSize(s string) (Size, error) {
	bad := fmt.Errorf("%q is not a size (use e.g. 8GiB, 512MiB or a number of bytes)", s)
	t := strings.ToLower(strings.TrimSpace(s))
	num := strings.TrimRightFunc(t, func(r rune) bool { return r >= 'a' && r <= 'z' })
	unit := strings.TrimSpace(t[len(num):])
	num = strings.TrimSpace(num)
	if num == "" {
		return 0, bad
	}
	for _, u := range sizeUnits {
		if u.name != unit {
			continue
		}
		if i, err := strconv.ParseInt(num, 10, 64); err == nil {
			if i < 0 {
				return 0, fmt.Errorf("%q: a size must not be negative", s)
			}
			if u.mult > 1 && i > int64(1<<63-1)/int64(u.mult) {
				return 0, fmt.Errorf("%q is out of range", s)
			}
			return Size(i * int64(u.mult)), nil
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f < 0 || f != f {
			return 0, bad
		}
		v := f * u.mult
		if v >= 1<<63 {
			return 0, fmt.Errorf("%q is out of range", s)
		}
		return Size(v), nil
	}
	return 0, bad
}

// String writes the size in the largest binary unit that divides it exactly.
func (s Size) String() string {
	for _, u := range []struct {
		name string
		v    Size
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if s != 0 && s%u.v == 0 {
			return strconv.FormatInt(int64(s/u.v), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// MarshalYAML writes the size as String does.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalText writes the size as String does (JSON for the status page).
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Duration is a time.Duration written as "30s", "10m", "1h30m".
type Duration time.Duration

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use e.g. 30s, 10m or 1h)", s)
	}
	return d, nil
}

// D is the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration as "30s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalText writes the duration as "30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
