package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// jsonValue is a parsed JSON value that keeps the order of object members,
// which a schema's properties need, and numbers as written.
type jsonValue struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, 'z' null
	members []jsonMember
	items   []*jsonValue
	str     string // string value, or a number's text
	b       bool
}

type jsonMember struct {
	key string
	val *jsonValue
}

func parseJSON(data []byte) (*jsonValue, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeJSON(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("text after the JSON value")
	}
	return v, nil
}

func decodeJSON(d *json.Decoder) (*jsonValue, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			v := &jsonValue{kind: 'o'}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				val, err := decodeJSON(d)
				if err != nil {
					return nil, err
				}
				v.members = append(v.members, jsonMember{k.(string), val})
			}
			_, err := d.Token()
			return v, err
		case '[':
			v := &jsonValue{kind: 'a'}
			for d.More() {
				item, err := decodeJSON(d)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, item)
			}
			_, err := d.Token()
			return v, err
		}
	case string:
		return &jsonValue{kind: 's', str: x}, nil
	case json.Number:
		return &jsonValue{kind: 'n', str: string(x)}, nil
	case bool:
		return &jsonValue{kind: 'b', b: x}, nil
	case nil:
		return &jsonValue{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func (v *jsonValue) get(key string) (*jsonValue, bool) {
	for _, m := range v.members {
		if m.key == key {
			return m.val, true
		}
	}
	return nil, false
}

// compact writes v as compact JSON: members in order, numbers as written,
// strings with only the escapes JSON requires.
func (v *jsonValue) compact(out []byte) []byte {
	switch v.kind {
	case 'o':
		out = append(out, '{')
		for i, m := range v.members {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendJSONString(out, m.key)
			out = append(out, ':')
			out = m.val.compact(out)
		}
		return append(out, '}')
	case 'a':
		out = append(out, '[')
		for i, it := range v.items {
			if i > 0 {
				out = append(out, ',')
			}
			out = it.compact(out)
		}
		return append(out, ']')
	case 's':
		return appendJSONString(out, v.str)
	case 'n':
		return append(out, v.str...)
	case 'b':
		return strconv.AppendBool(out, v.b)
	}
	return append(out, "null"...)
}

func appendJSONString(out []byte, s string) []byte {
	out = append(out, '"')
	for _, r := range s {
		switch {
		case r == '"':
			out = append(out, '\\', '"')
		case r == '\\':
			out = append(out, '\\', '\\')
		case r == '\n':
			out = append(out, '\\', 'n')
		case r == '\r':
			out = append(out, '\\', 'r')
		case r == '\t':
			out = append(out, '\\', 't')
		case r < 0x20:
			out = fmt.Appendf(out, "\\u%04x", r)
		default:
			out = utf8.AppendRune(out, r)
		}
	}
	return append(out, '"')
}

func (v *jsonValue) kindName() string {
	switch v.kind {
	case 'o':
		return "an object"
	case 'a':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	}
	return "null"
}
