// Parsing: the YAML walk that decodes a config file over the defaults,
// strictly, with every error naming its key and line.

package daemon

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ConfigError is one thing wrong in a config: the key (dotted path, e.g.
// "draft.top_k"), where it is, and what would be right.
type ConfigError struct {
	File string // "" when the value came from defaults or flags
	Line int    // 0 when unknown
	Key  string
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadConfig reads the config file at path over the defaults and validates
// it. A missing file is an error wrapping fs.ErrNotExist.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes data (the file name is for messages) over the
// defaults, strictly: unknown keys, values of the wrong type and values out
// of range are errors naming the key and line. All problems are reported
// at once, joined.
func ParseConfig(name string, data []byte) (Config, error) {
	cfg := DefaultConfig()
	lines, err := decodeConfig(name, data, &cfg)
	// Values that failed to decode kept their defaults, so validating what
	// did decode adds only new problems: report them all at once.
	if err := errors.Join(err, cfg.validate(name, lines)); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// decodeConfig walks the YAML tree itself (rather than yaml.v3's
// KnownFields) so that every error carries the dotted key and its line.
func decodeConfig(name string, data []byte, cfg *Config) (map[string]int, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &ConfigError{File: name, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	d := decoder{file: name, lines: map[string]int{}}
	root := &doc
	if root.Kind == 0 {
		return d.lines, nil // no document at all
	}
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return d.lines, nil // empty file: all defaults
		}
		root = root.Content[0]
	}
	if isNull(root) {
		return d.lines, nil
	}
	d.value("", root, reflect.ValueOf(cfg).Elem())
	return d.lines, errors.Join(d.errs...)
}

type decoder struct {
	file  string
	lines map[string]int // key path -> line of the key
	errs  []error
}

func (d *decoder) fail(n *yaml.Node, key, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	if l, ok := d.lines[key]; ok {
		line = l
	}
	d.errs = append(d.errs, &ConfigError{File: d.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// listExamples are the values a list key's error message shows.
var listExamples = map[string][]string{"draft.drafters": {"mtp", "suffix"}, "api.public": publicRoutes,
	"model.aliases": {"gpt-4o-mini"}, "api.cors_origins": {"https://app.example.com", "http://localhost:3000"}}

var (
	sizeType     = reflect.TypeFor[Size]()
	durationType = reflect.TypeFor[Duration]()
)

// value decodes node n into v, the field at dotted key path.
func (d *decoder) value(path string, n *yaml.Node, v reflect.Value) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if isNull(n) {
		return // an empty value keeps the default
	}
	switch {
	case v.Type() == sizeType:
		s, err := scalar(n)
		if err == nil {
			var sz Size
			if sz, err = ParseSize(s); err == nil {
				v.Set(reflect.ValueOf(sz))
				return
			}
		}
		d.fail(n, path, "%v", err)
	case v.Type() == durationType:
		s, err := scalar(n)
		if err == nil {
			var dur time.Duration
			if dur, err = parseDuration(s); err == nil {
				v.Set(reflect.ValueOf(Duration(dur)))
				return
			}
		}
		d.fail(n, path, "%v", err)
	case v.Kind() == reflect.Struct:
		d.mapping(path, n, v)
	case v.Kind() == reflect.String:
		s, err := scalar(n)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		v.SetString(s)
	case v.Kind() == reflect.Int:
		s, err := scalar(n)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(s), "_", ""), 10, 32)
		if errors.Is(err, strconv.ErrRange) {
			d.fail(n, path, "%s is out of range", s)
			return
		}
		if err != nil || (n.Tag != "!!int" && n.Tag != "!!str") {
			d.fail(n, path, "%q is not a whole number", s)
			return
		}
		v.SetInt(i)
	case v.Kind() == reflect.Float64:
		s, err := scalar(n)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || (n.Tag != "!!float" && n.Tag != "!!int" && n.Tag != "!!str") {
			d.fail(n, path, "%q is not a number", s)
			return
		}
		v.SetFloat(f)
	case v.Kind() == reflect.Bool:
		s, err := scalar(n)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		switch strings.ToLower(s) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.fail(n, path, "%q is not a boolean (use true or false)", s)
		}
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "want a list, e.g. [%s]", strings.Join(listExamples[path], ", "))
			return
		}
		out := make([]string, 0, len(n.Content))
		for i, item := range n.Content {
			for item.Kind == yaml.AliasNode && item.Alias != nil {
				item = item.Alias
			}
			s, err := scalar(item)
			if err != nil {
				d.fail(item, fmt.Sprintf("%s[%d]", path, i), "%v", err)
				continue
			}
			out = append(out, s)
		}
		v.Set(reflect.ValueOf(out))
	default:
		panic(fmt.Sprintf("config: field %s has unsupported type %s", path, v.Type()))
	}
}

// mapping decodes a YAML mapping into struct v, refusing unknown and
// repeated keys.
func (d *decoder) mapping(path string, n *yaml.Node, v reflect.Value) {
	where := path
	if where == "" {
		where = "the top level"
	}
	fields := yamlFields(v.Type())
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "%s must be a mapping of %s", where, strings.Join(fieldNames(fields), ", "))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		full := key
		if path != "" {
			full = path + "." + key
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be plain names")
			continue
		}
		idx, ok := fields[key]
		if !ok {
			msg := fmt.Sprintf("unknown key; %s has %s", where, strings.Join(fieldNames(fields), ", "))
			if s := closest(key, fieldNames(fields)); s != "" {
				msg = fmt.Sprintf("unknown key (did you mean %s?); %s has %s", s, where, strings.Join(fieldNames(fields), ", "))
			}
			d.errs = append(d.errs, &ConfigError{File: d.file, Line: k.Line, Key: full, Msg: msg})
			continue
		}
		if first, dup := seen[key]; dup {
			d.errs = append(d.errs, &ConfigError{File: d.file, Line: k.Line, Key: full,
				Msg: fmt.Sprintf("given twice (first on line %d)", first)})
			continue
		}
		seen[key] = k.Line
		d.lines[full] = k.Line
		d.value(full, val, v.Field(idx))
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// scalar returns a scalar node's text; mappings and lists are refused.
func scalar(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, nil
	case yaml.MappingNode:
		return "", errors.New("want a single value, not a mapping")
	case yaml.SequenceNode:
		return "", errors.New("want a single value, not a list")
	default:
		return "", errors.New("want a single value")
	}
}

// yamlFields maps a struct's yaml keys to field indexes.
func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			m[tag] = i
		}
	}
	return m
}

func fieldNames(fields map[string]int) []string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return fields[a] - fields[b] })
	return names
}

// closest returns the candidate within two edits of key, if one is.
func closest(key string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(key), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
