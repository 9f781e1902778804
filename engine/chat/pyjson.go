package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// This file holds the two halves of the JSON trap that PITFALLS.md names:
// decoding a client's JSON into template values that keep the client's key
// order (gonja's ordered *exec.Dict), and writing values back the way Python's
// json.dumps(x, ensure_ascii=False) does, which is what Hugging Face's tojson
// filter calls.

// list is a JSON array or a Python list inside a template. It indexes the way
// Python does (x[-1] is the last item), which gonja's plain slices do not
// for one-item lists.
type list []any

// GetItem implements exec.ItemGetter.
func (l list) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.ToValue(l[i]), true
}

// pyNone is JSON null inside a template. gonja has one nil for both
// undefined and None, but Jinja2 prints None as "None" and calls it defined,
// which templates show (Qwen3.5 writes a null argument as "None"). An empty
// slice is falsy and non-nil; the tests none, defined, undefined, iterable and
// sequence are replaced to treat it as None.
type pyNone []struct{}

func (pyNone) String() string { return "None" }

func isNone(v *exec.Value) bool {
	if v == nil || v.IsNil() {
		return true
	}
	_, ok := v.Interface().(pyNone)
	return ok
}

// decodeJSON decodes one JSON value into template values: objects become
// *exec.Dict in the order their keys were sent (a repeated key keeps its first
// place and its last value, as Python's dict does), arrays become list,
// integers int, other numbers float64.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the top-level value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := &exec.Dict{Pairs: []*exec.Pair{}}
			index := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("invalid JSON: %w", err)
				}
				key, _ := kt.(string)
				val, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				if i, dup := index[key]; dup {
					d.Pairs[i].Value = exec.ToValue(val)
					continue
				}
				index[key] = len(d.Pairs)
				d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.ToValue(val)})
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("invalid JSON: %w", err)
			}
			return d, nil
		case '[':
			l := list{}
			for dec.More() {
				val, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, val)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("invalid JSON: %w", err)
			}
			return l, nil
		}
		return nil, fmt.Errorf("invalid JSON: unexpected %q", t)
	case json.Number:
		return decodeNumber(string(t)), nil
	case nil:
		return pyNone{}, nil
	default: // string, bool
		return t, nil
	}
}

// decodeNumber mirrors Python's json.loads: a literal with a fraction or an
// exponent is a float, any other an int. Integers beyond int64 become floats
// (Python would keep them exact; no chat request carries such numbers).
func decodeNumber(s string) any {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return int(i)
		}
	}
	f, _ := strconv.ParseFloat(s, 64) // out of range gives ±Inf, as in Python
	return f
}

// pyDumpOptions are json.dumps' keyword arguments that chat templates use.
type pyDumpOptions struct {
	ensureASCII bool
	indent      int // < 0: no indent
	itemSep     string
	keySep      string
	sortKeys    bool
}

func defaultDumpOptions() pyDumpOptions {
	return pyDumpOptions{indent: -1, itemSep: ", ", keySep: ": "}
}

// pyDumps writes v as Python's json.dumps does.
func pyDumps(v any, opt pyDumpOptions) (string, error) {
	var b strings.Builder
	if err := pyDump(&b, exec.ToValue(v), opt, 0, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

const maxDumpDepth = 200

func pyDump(b *strings.Builder, v *exec.Value, opt pyDumpOptions, level, depth int) error {
	if depth > maxDumpDepth {
		return errors.New("tojson: value nested too deeply")
	}
	if isNone(v) {
		b.WriteString("null")
		return nil
	}
	if v.IsError() {
		return errors.New(v.Error())
	}
	switch {
	case v.IsBool():
		if v.Bool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInteger():
		b.WriteString(strconv.FormatInt(int64(v.Integer()), 10))
	case v.IsFloat():
		b.WriteString(pyFloatJSON(v.Float()))
	case v.IsString():
		pyQuote(b, v.String(), opt.ensureASCII)
	case v.IsDict():
		type kv struct {
			key string
			val *exec.Value
		}
		var pairs []kv
		var keyErr error
		v.Iterate(func(_, _ int, key, val *exec.Value) bool {
			k, err := pyKey(key)
			if err != nil {
				keyErr = err
				return false
			}
			pairs = append(pairs, kv{k, val})
			return true
		}, func() {})
		if keyErr != nil {
			return keyErr
		}
		if opt.sortKeys {
			sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].key < pairs[j].key })
		}
		if len(pairs) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, p := range pairs {
			if i > 0 {
				b.WriteString(opt.itemSep)
			}
			newline(b, opt, level+1)
			pyQuote(b, p.key, opt.ensureASCII)
			b.WriteString(opt.keySep)
			if err := pyDump(b, p.val, opt, level+1, depth+1); err != nil {
				return err
			}
		}
		newline(b, opt, level)
		b.WriteByte('}')
	case v.IsList():
		n := v.Len()
		if n == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(opt.itemSep)
			}
			newline(b, opt, level+1)
			if err := pyDump(b, v.Index(i), opt, level+1, depth+1); err != nil {
				return err
			}
		}
		newline(b, opt, level)
		b.WriteByte(']')
	default:
		return fmt.Errorf("tojson: object of type %s is not JSON serializable", reflect.TypeOf(v.Interface()))
	}
	return nil
}

func newline(b *strings.Builder, opt pyDumpOptions, level int) {
	if opt.indent < 0 {
		return
	}
	b.WriteByte('\n')
	b.WriteString(strings.Repeat(" ", opt.indent*level))
}

// pyKey converts a dict key as json.dumps does: strings as is, numbers,
// booleans and None to their JSON spelling.
func pyKey(k *exec.Value) (string, error) {
	switch {
	case isNone(k):
		return "null", nil
	case k.IsString():
		return k.String(), nil
	case k.IsBool():
		if k.Bool() {
			return "true", nil
		}
		return "false", nil
	case k.IsInteger():
		return strconv.Itoa(k.Integer()), nil
	case k.IsFloat():
		return pyFloatJSON(k.Float()), nil
	}
	return "", fmt.Errorf("tojson: keys must be str, int, float, bool or None, not %T", k.Interface())
}

// pyFloatJSON is float.__repr__ plus json's spelling of the non-finite values.
func pyFloatJSON(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pyFloatRepr(f)
}

// pyFloatRepr is Python's repr(float): the shortest digits that round-trip,
// in positional notation when the decimal exponent is in [-4, 16) (with ".0"
// when integral), otherwise as d.ddde±XX.
func pyFloatRepr(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // e.g. "-1.5e+16", "1e-05"
	i := strings.LastIndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[i+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// pyQuote writes s as a JSON string the way json.dumps does: only '"', '\\'
// and control characters are escaped (lower-case \u00XX), everything else is
// kept as is unless ensureASCII asks for \uXXXX escapes (surrogate pairs
// above U+FFFF).
func pyQuote(b *strings.Builder, s string, ensureASCII bool) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				if c < 0x20 || (ensureASCII && c == 0x7f) {
					b.WriteString(`\u00`)
					b.WriteByte(hex[c>>4])
					b.WriteByte(hex[c&0xf])
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !ensureASCII {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		writeU := func(u rune) {
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[(u>>shift)&0xf])
			}
		}
		if r > 0xffff {
			r -= 0x10000
			writeU(0xd800 + (r>>10)&0x3ff)
			writeU(0xdc00 + r&0x3ff)
		} else {
			writeU(r)
		}
		i += size
	}
	b.WriteByte('"')
}
