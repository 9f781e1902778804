package grammar

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SchemaError is a JSON schema SchemaToGBNF cannot turn into a grammar.
// Path is a JSON pointer into the schema ("" is the whole schema), Keyword
// the keyword at fault ("" when the schema itself is).
type SchemaError struct {
	Path    string
	Keyword string
	Msg     string
}

func (e *SchemaError) Error() string {
	path := e.Path
	if path == "" {
		path = "(root)"
	}
	if e.Keyword == "" {
		return fmt.Sprintf("json schema at %s: %s", path, e.Msg)
	}
	return fmt.Sprintf("json schema at %s: %s: %s", path, e.Keyword, e.Msg)
}

// Keywords that only annotate a schema; they do not constrain values.
var annotationKeywords = map[string]bool{
	"description": true, "title": true, "examples": true, "default": true,
	"$schema": true, "$id": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
}

// The keywords SchemaToGBNF turns into grammar, with the type each applies
// to ("" for keywords about the schema as a whole).
var schemaKeywords = map[string]string{
	"type": "", "enum": "", "const": "", "anyOf": "", "oneOf": "", "allOf": "",
	"$ref": "", "$defs": "", "definitions": "",
	"properties": "object", "required": "object", "additionalProperties": "object",
	"items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array",
	"minLength": "string", "maxLength": "string", "format": "string",
	"minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number",
}

var jsonTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// Bounds of the JSON the grammars allow, so that a model cannot write
// without end: whitespace between tokens, digits of numbers.
const (
	maxIndent    = 20 // blanks after one newline between two JSON tokens
	maxIntDigits = 16
)

// SchemaToGBNF turns a JSON schema into GBNF rules whose names all start
// with prefix, and returns them with the name of the rule for the schema's
// value. Errors are *SchemaError. See the package documentation for the
// keywords supported.
func SchemaToGBNF(schema []byte, prefix string) (rules string, root string, err error) {
	rules, root, _, err = schemaGrammar(schema, prefix)
	return rules, root, err
}

// FromJSONSchema compiles a grammar for the JSON values a schema accepts:
// SchemaToGBNF's rules under a root rule.
func FromJSONSchema(schema []byte) (*Grammar, error) {
	_, _, g, err := schemaGrammar(schema, "")
	return g, err
}

// JSONObject is a grammar for any JSON object (OpenAI's json_object
// response format), with whitespace between tokens bounded as for schemas.
// Keep one per process: its caches fill once.
func JSONObject() *Grammar {
	c := newSchemaConv("")
	root := c.need("any-object")
	g, err := ParseGBNF("root ::= " + root + "\n" + c.out.String())
	if err != nil {
		panic("grammar: JSONObject: " + err.Error())
	}
	return g
}

func schemaGrammar(schema []byte, prefix string) (string, string, *Grammar, error) {
	for i := 0; i < len(prefix); i++ {
		if !isNameByte(prefix[i]) {
			return "", "", nil, &SchemaError{Msg: fmt.Sprintf("rule prefix %q may only hold letters, digits and '-'", prefix)}
		}
	}
	doc, err := parseJSON(schema)
	if err != nil {
		return "", "", nil, &SchemaError{Msg: "not valid JSON: " + err.Error()}
	}
	c := newSchemaConv(prefix)
	c.doc = doc
	root, err := c.gen(doc, "", "schema")
	if err != nil {
		return "", "", nil, err
	}
	rules := c.out.String()
	if c.used["root"] {
		return "", "", nil, &SchemaError{Msg: fmt.Sprintf("rule prefix %q makes a rule named root", prefix)}
	}
	g, err := ParseGBNF("root ::= " + root + "\n" + rules)
	if err != nil {
		var se *SyntaxError
		if errors.As(err, &se) {
			line := se.Line - 2 // the check grammar's first line is its root rule
			path := ""
			if line >= 0 && line < len(c.rulePaths) {
				path = c.rulePaths[line]
			}
			return "", "", nil, &SchemaError{Path: path, Keyword: "$ref", Msg: "no finite JSON value satisfies the schema: " + se.Msg}
		}
		return "", "", nil, err
	}
	return rules, root, g, nil
}

type schemaConv struct {
	prefix    string
	doc       *jsonValue
	out       strings.Builder
	rulePaths []string // per line of out: the schema path of the rule
	used      map[string]bool
	refs      map[string]string // $ref target -> rule
	shared    map[string]string // shared rule -> its name
}

func newSchemaConv(prefix string) *schemaConv {
	return &schemaConv{prefix: prefix, used: map[string]bool{}, refs: map[string]string{}, shared: map[string]string{}}
}

// fresh reserves a rule name for base.
func (c *schemaConv) fresh(base string) string {
	name := c.prefix + base
	for i := 2; c.used[name]; i++ {
		name = c.prefix + base + "-" + strconv.Itoa(i)
	}
	c.used[name] = true
	return name
}

func (c *schemaConv) rule(name, body, path string) {
	c.out.WriteString(name)
	c.out.WriteString(" ::= ")
	c.out.WriteString(body)
	c.out.WriteByte('\n')
	c.rulePaths = append(c.rulePaths, path)
}

func pointerEscape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// nameHint turns a property name or pointer into rule-name characters.
func nameHint(s string) string {
	var b strings.Builder
	dash := true
	for _, r := range s {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 24 {
		out = strings.TrimRight(out[:24], "-")
	}
	if out == "" {
		out = "x"
	}
	return out
}

func childHint(hint, part string) string {
	h := hint + "-" + part
	if len(h) > 64 {
		h = h[len(h)-64:]
		h = strings.TrimLeft(h, "-")
	}
	return h
}

// gen returns a GBNF expression (a rule name or a parenthesized
// expression) for the values schema s at path accepts.
func (c *schemaConv) gen(s *jsonValue, path, hint string) (string, error) {
	switch s.kind {
	case 'b':
		if s.b {
			return c.need("any-value"), nil
		}
		return "", &SchemaError{Path: path, Msg: "schema false allows no value here"}
	case 'o':
	default:
		return "", &SchemaError{Path: path, Msg: "a schema must be an object or a boolean, not " + s.kindName()}
	}
	for _, m := range s.members {
		if _, ok := schemaKeywords[m.key]; !ok && !annotationKeywords[m.key] {
			return "", &SchemaError{Path: path + "/" + pointerEscape(m.key), Keyword: m.key, Msg: "keyword not supported"}
		}
	}
	for _, kw := range []string{"$ref", "anyOf", "oneOf", "allOf"} {
		v, ok := s.get(kw)
		if !ok {
			continue
		}
		for _, m := range s.members {
			if m.key != kw && !annotationKeywords[m.key] && m.key != "$defs" && m.key != "definitions" {
				return "", &SchemaError{Path: path + "/" + pointerEscape(m.key), Keyword: m.key, Msg: "cannot be combined with " + kw + " (move it into the referenced or listed schemas)"}
			}
		}
		kpath := path + "/" + kw
		switch kw {
		case "$ref":
			if v.kind != 's' {
				return "", &SchemaError{Path: kpath, Keyword: kw, Msg: "must be a string"}
			}
			return c.ref(v.str, kpath)
		case "allOf":
			if v.kind != 'a' || len(v.items) != 1 {
				return "", &SchemaError{Path: kpath, Keyword: kw, Msg: "only allOf with exactly one schema is supported"}
			}
			return c.gen(v.items[0], kpath+"/0", hint)
		default: // anyOf, oneOf: alternatives (exact for oneOf when the branches do not overlap)
			if v.kind != 'a' || len(v.items) == 0 {
				return "", &SchemaError{Path: kpath, Keyword: kw, Msg: "must be a non-empty array of schemas"}
			}
			alts := make([]string, len(v.items))
			for i, it := range v.items {
				var err error
				if alts[i], err = c.gen(it, kpath+"/"+strconv.Itoa(i), childHint(hint, strconv.Itoa(i))); err != nil {
					return "", err
				}
			}
			name := c.fresh(hint)
			c.rule(name, strings.Join(alts, " | "), path)
			return name, nil
		}
	}
	types, err := c.types(s, path)
	if err != nil {
		return "", err
	}
	if _, ok := s.get("enum"); ok {
		return c.enum(s, path, hint, types)
	}
	if _, ok := s.get("const"); ok {
		return c.enum(s, path, hint, types)
	}
	// A keyword for a type the schema does not allow would be vacuous; it is
	// more likely a mistake than intended, so say so.
	for _, m := range s.members {
		t := schemaKeywords[m.key]
		if t == "" {
			continue
		}
		if !slices.Contains(types, t) && !(t == "number" && slices.Contains(types, "integer")) {
			return "", &SchemaError{Path: path + "/" + pointerEscape(m.key), Keyword: m.key, Msg: fmt.Sprintf("applies to %ss, which the schema's type (%s) does not allow", t, strings.Join(types, ", "))}
		}
	}
	if len(types) == len(jsonTypes) && !slices.ContainsFunc(s.members, func(m jsonMember) bool { return schemaKeywords[m.key] != "" }) {
		return c.need("any-value"), nil
	}
	var alts []string
	for _, t := range types {
		var alt string
		var err error
		switch t {
		case "string":
			alt, err = c.stringValue(s, path, hint)
		case "number":
			alt, err = c.numberValue(s, path)
		case "integer":
			alt, err = c.integerValue(s, path, hint)
		case "boolean":
			alt = c.need("boolean")
		case "null":
			alt = `"null"`
		case "object":
			alt, err = c.objectValue(s, path, hint)
		case "array":
			alt, err = c.arrayValue(s, path, hint)
		}
		if err != nil {
			return "", err
		}
		alts = append(alts, alt)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	name := c.fresh(hint)
	c.rule(name, strings.Join(alts, " | "), path)
	return name, nil
}

// types returns the types a schema allows: its type keyword, or else the
// types its other keywords are about (a schema with properties and no type
// accepts any non-object too, but an object is what its author means), or
// else all of them.
func (c *schemaConv) types(s *jsonValue, path string) ([]string, error) {
	t, ok := s.get("type")
	if !ok {
		var out []string
		for _, typ := range jsonTypes {
			for _, m := range s.members {
				if kt := schemaKeywords[m.key]; kt == typ && !slices.Contains(out, typ) {
					out = append(out, typ)
				}
			}
		}
		if len(out) == 0 {
			return slices.Clone(jsonTypes), nil
		}
		return out, nil
	}
	var names []*jsonValue
	switch t.kind {
	case 's':
		names = []*jsonValue{t}
	case 'a':
		names = t.items
	}
	if len(names) == 0 {
		return nil, &SchemaError{Path: path + "/type", Keyword: "type", Msg: "must be a type name or a non-empty array of them"}
	}
	var out []string
	for i, n := range names {
		if n.kind != 's' || !slices.Contains(jsonTypes, n.str) {
			p := path + "/type"
			if t.kind == 'a' {
				p += "/" + strconv.Itoa(i)
			}
			return nil, &SchemaError{Path: p, Keyword: "type", Msg: "must be one of " + strings.Join(jsonTypes, ", ")}
		}
		if !slices.Contains(out, n.str) {
			out = append(out, n.str)
		}
	}
	return out, nil
}

// ref returns the rule for a $ref target, generating it once.
func (c *schemaConv) ref(ref, path string) (string, error) {
	if name, ok := c.refs[ref]; ok {
		return name, nil
	}
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return "", &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q: only references into this schema (#, #/$defs/..., #/definitions/...) are supported", ref)}
	}
	if f, err := unescapeFragment(frag); err == nil {
		frag = f
	}
	target := c.doc
	if frag != "" {
		if !strings.HasPrefix(frag, "/") {
			return "", &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q is not a JSON pointer", ref)}
		}
		for _, part := range strings.Split(frag[1:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			var next *jsonValue
			switch target.kind {
			case 'o':
				next, _ = target.get(part)
			case 'a':
				if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(target.items) {
					next = target.items[i]
				}
			}
			if next == nil {
				return "", &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q points at nothing in the schema", ref)}
			}
			target = next
		}
	}
	hint := "ref"
	if frag != "" {
		parts := strings.Split(frag, "/")
		hint = "ref-" + nameHint(parts[len(parts)-1])
	}
	name := c.fresh(hint)
	c.refs[ref] = name
	body, err := c.gen(target, frag, childHint(hint, "value"))
	if err != nil {
		return "", err
	}
	c.rule(name, body, frag)
	return name, nil
}

func unescapeFragment(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", err
			}
			b.WriteByte(byte(v))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// enum handles enum and const: the listed values, as compact JSON, that
// also have one of the schema's types.
func (c *schemaConv) enum(s *jsonValue, path, hint string, types []string) (string, error) {
	kw := "enum"
	var vals []*jsonValue
	if v, ok := s.get("enum"); ok {
		if v.kind != 'a' || len(v.items) == 0 {
			return "", &SchemaError{Path: path + "/enum", Keyword: "enum", Msg: "must be a non-empty array"}
		}
		vals = v.items
	}
	if v, ok := s.get("const"); ok {
		if vals != nil {
			return "", &SchemaError{Path: path + "/const", Keyword: "const", Msg: "cannot be combined with enum"}
		}
		kw = "const"
		vals = []*jsonValue{v}
	}
	for _, m := range s.members {
		if m.key != "enum" && m.key != "const" && m.key != "type" && !annotationKeywords[m.key] && m.key != "$defs" && m.key != "definitions" {
			return "", &SchemaError{Path: path + "/" + pointerEscape(m.key), Keyword: m.key, Msg: "cannot be combined with " + kw}
		}
	}
	var alts []string
	for _, v := range vals {
		if !slices.ContainsFunc(types, func(t string) bool { return jsonHasType(v, t) }) {
			continue
		}
		lit := gbnfLiteral(string(v.compact(nil)))
		if !slices.Contains(alts, lit) {
			alts = append(alts, lit)
		}
	}
	if len(alts) == 0 {
		return "", &SchemaError{Path: path + "/" + kw, Keyword: kw, Msg: "no value listed has the schema's type (" + strings.Join(types, ", ") + ")"}
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	name := c.fresh(hint)
	c.rule(name, strings.Join(alts, " | "), path)
	return name, nil
}

func jsonHasType(v *jsonValue, t string) bool {
	switch t {
	case "object":
		return v.kind == 'o'
	case "array":
		return v.kind == 'a'
	case "string":
		return v.kind == 's'
	case "number":
		return v.kind == 'n'
	case "integer":
		if v.kind != 'n' {
			return false
		}
		r, ok := new(big.Rat).SetString(v.str)
		return ok && r.IsInt()
	case "boolean":
		return v.kind == 'b'
	}
	return v.kind == 'z'
}
