package update

import (
	"fmt"
	"strconv"
	"strings"
)

// semver is a parsed Semantic Versioning 2.0.0 version (semver.org).
type semver struct {
	major, minor, patch uint64
	pre                 []string // dot-separated pre-release identifiers
	build               string
}

// parseSemver parses MAJOR.MINOR.PATCH[-PRE][+BUILD], without a leading "v".
func parseSemver(s string) (semver, error) {
	var v semver
	rest := s
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		v.build = rest[i+1:]
		rest = rest[:i]
		if err := checkIdents(v.build, false); err != nil {
			return semver{}, fmt.Errorf("version %q: build metadata: %w", s, err)
		}
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		pre := rest[i+1:]
		rest = rest[:i]
		if err := checkIdents(pre, true); err != nil {
			return semver{}, fmt.Errorf("version %q: pre-release: %w", s, err)
		}
		v.pre = strings.Split(pre, ".")
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return semver{}, fmt.Errorf("version %q is not semantic MAJOR.MINOR.PATCH (e.g. 1.2.0)", s)
	}
	nums := []*uint64{&v.major, &v.minor, &v.patch}
	for i, p := range parts {
		if !isNumeric(p) || (len(p) > 1 && p[0] == '0') {
			return semver{}, fmt.Errorf("version %q: %q is not a number without leading zeros", s, p)
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return semver{}, fmt.Errorf("version %q: %w", s, err)
		}
		*nums[i] = n
	}
	return v, nil
}

func checkIdents(s string, pre bool) error {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return fmt.Errorf("empty identifier")
		}
		for _, c := range id {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				return fmt.Errorf("identifier %q: character %q is not [0-9A-Za-z-]", id, c)
			}
		}
		if pre && isNumeric(id) && len(id) > 1 && id[0] == '0' {
			return fmt.Errorf("numeric identifier %q has a leading zero", id)
		}
	}
	return nil
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// compare orders versions by SemVer precedence (build metadata ignored):
// -1, 0 or +1.
func (a semver) compare(b semver) int {
	for _, d := range [][2]uint64{{a.major, b.major}, {a.minor, b.minor}, {a.patch, b.patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1 // a release outranks its pre-releases
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		x, y := a.pre[i], b.pre[i]
		if x == y {
			continue
		}
		xn, yn := isNumeric(x), isNumeric(y)
		switch {
		case xn && yn:
			xv, _ := strconv.ParseUint(x, 10, 64)
			yv, _ := strconv.ParseUint(y, 10, 64)
			if xv < yv {
				return -1
			}
			return 1
		case xn:
			return -1 // numeric identifiers rank below alphanumeric ones
		case yn:
			return 1
		case x < y:
			return -1
		default:
			return 1
		}
	}
	switch {
	case len(a.pre) < len(b.pre):
		return -1
	case len(a.pre) > len(b.pre):
		return 1
	}
	return 0
}

// compareVersions compares two version strings that are known to parse.
func compareVersions(a, b string) int {
	va, err1 := parseSemver(a)
	vb, err2 := parseSemver(b)
	if err1 != nil || err2 != nil {
		return strings.Compare(a, b)
	}
	return va.compare(vb)
}
