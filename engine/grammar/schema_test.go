package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
)

func accepts(g *Grammar, v *Vocab, text string) bool {
	m := g.NewMatcher(v)
	return m.AcceptBytes([]byte(text)) == nil && m.CanEnd()
}

func TestSchemaErrors(t *testing.T) {
	for _, tc := range []struct {
		schema, path, keyword string
	}{
		{`{"type":"string","pattern":"a+"}`, "/pattern", "pattern"},
		{`{"type":"object","properties":{"location":{"type":"strin"}}}`, "/properties/location/type", "type"},
		{`{"properties":{"a":{"multipleOf":2}}}`, "/properties/a/multipleOf", "multipleOf"},
		{`{"properties":{"a~b/c":{"type":"foo"}}}`, "/properties/a~0b~1c/type", "type"},
		{`{"type":["string",3]}`, "/type/1", "type"},
		{`{"type":"string","format":"email"}`, "/format", "format"},
		{`{"type":"number","maximum":5}`, "/maximum", "maximum"},
		{`{"type":"number","minimum":1}`, "/minimum", "minimum"},
		{`{"type":"string","minimum":1}`, "/minimum", "minimum"},
		{`{"$ref":"#/$defs/missing"}`, "/$ref", "$ref"},
		{`{"$ref":"https://example.com/s.json"}`, "/$ref", "$ref"},
		{`{"$ref":"#/$defs/a","type":"string","$defs":{"a":{}}}`, "/type", "type"},
		{`{"allOf":[{"type":"string"},{"type":"integer"}]}`, "/allOf", "allOf"},
		{`{"anyOf":[],"description":"x"}`, "/anyOf", "anyOf"},
		{`{"anyOf":[{"type":"string"}],"type":"string"}`, "/type", "type"},
		{`{"type":"array","items":{"type":"string"},"uniqueItems":true}`, "/uniqueItems", "uniqueItems"},
		{`{"type":"array","minItems":3,"maxItems":1}`, "/minItems", "minItems"},
		{`{"type":"array","items":[{"type":"string"}]}`, "/items", "items"},
		{`{"type":"array","maxItems":-1}`, "/maxItems", "maxItems"},
		{`{"type":"string","minLength":1.5}`, "/minLength", "minLength"},
		{`{"type":"string","maxLength":100000}`, "/maxLength", "maxLength"},
		{`{"type":"string","minLength":3,"maxLength":2}`, "/maxLength", "maxLength"},
		{`{"type":"string","format":"date","maxLength":20}`, "/format", "format"},
		{`{"type":"integer","minimum":5,"maximum":1}`, "", "minimum"},
		{`{"type":"integer","exclusiveMinimum":true}`, "/exclusiveMinimum", "exclusiveMinimum"},
		{`{"type":"object","required":["a"],"properties":{},"additionalProperties":false}`, "/required", "required"},
		{`{"type":"object","properties":{"a":false},"required":["a"]}`, "/properties/a", "required"},
		{`{"type":"object","additionalProperties":3}`, "/additionalProperties", "additionalProperties"},
		{`{"enum":[]}`, "/enum", "enum"},
		{`{"type":"integer","enum":["a","b"]}`, "/enum", "enum"},
		{`{"type":"string","enum":["a"],"maxLength":3}`, "/maxLength", "maxLength"},
		{`{"enum":["a"],"const":"a"}`, "/const", "const"},
		{`{"$defs":{"x":{"type":"string","foo":1}},"properties":{"p":{"$ref":"#/$defs/x"}}}`, "/$defs/x/foo", "foo"},
		{`{"$defs":{"a":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"],"additionalProperties":false}},"$ref":"#/$defs/a"}`, "/$defs/a", "$ref"},
		{`{"nullable":true,"type":"string"}`, "/nullable", "nullable"},
		{`false`, "", ""},
		{`[1,2]`, "", ""},
		{`{"type":"string"`, "", ""},
	} {
		_, _, err := SchemaToGBNF([]byte(tc.schema), "p-")
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%s: error %v, want a *SchemaError", tc.schema, err)
			continue
		}
		if se.Path != tc.path || se.Keyword != tc.keyword {
			t.Errorf("%s: error at %q keyword %q (%v), want %q keyword %q", tc.schema, se.Path, se.Keyword, se, tc.path, tc.keyword)
		}
		if _, err := FromJSONSchema([]byte(tc.schema)); !errors.As(err, &se) {
			t.Errorf("FromJSONSchema(%s): %v, want a *SchemaError", tc.schema, err)
		}
	}
}

func TestSchemaToGBNFPrefix(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"integer"}}}`)
	r1, root1, err := SchemaToGBNF(schema, "one-")
	if err != nil {
		t.Fatal(err)
	}
	r2, root2, err := SchemaToGBNF(schema, "two-")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(r1+r2), "\n") {
		name, _, _ := strings.Cut(line, " ::= ")
		if !strings.HasPrefix(name, "one-") && !strings.HasPrefix(name, "two-") {
			t.Errorf("rule %q does not start with its prefix", name)
		}
	}
	// Two schemas in one grammar, as a tool-call grammar would combine them.
	g := mustGBNF(t, fmt.Sprintf("root ::= %s | \"<\" %s \">\"\n%s%s", root1, root2, r1, r2))
	v, _ := synthVocab()
	for text, want := range map[string]bool{`{"a":"x","b":1}`: true, `<{"b":2}>`: true, `<{"a":"x","b":1.5}>`: false, `{"b":"x"}`: false} {
		if got := accepts(g, v, text); got != want {
			t.Errorf("%s: accepted %v, want %v", text, got, want)
		}
	}
	if _, _, err := SchemaToGBNF(schema, "bad prefix"); err == nil {
		t.Error("a prefix with a space was accepted")
	}
}

func TestSchemaLanguage(t *testing.T) {
	v, _ := synthVocab()
	for _, tc := range []struct {
		schema string
		yes    []string
		no     []string
	}{
		{ // property order kept, optional ones may be left out, no others
			`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"]}`,
			[]string{`{"b":1}`, `{"a":1,"b":2}`, `{"b":1,"c":2}`, `{"a":1,"b":2,"c":3}`, "{ \"a\" : 1 ,\n  \"b\":2\n}"},
			[]string{`{}`, `{"a":1}`, `{"b":1,"a":2}`, `{"b":1,"d":2}`, `{"b":1,}`, `{,"b":1}`, `{"b":1}}`, `{"b" :  1}`},
		},
		{ // additionalProperties true: other keys, not the declared ones again
			`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["b"],"additionalProperties":true}`,
			[]string{`{"b":1,"d":[1,{"x":null}]}`, `{"b":1,"ab":"s","":0}`, `{"a":1,"b":2,"bb":true,"é":1}`},
			[]string{`{"b":1,"a":"x"}`, `{"b":1,"b":2}`, `{"d":1}`},
		},
		{
			`{"additionalProperties":{"type":"integer"}}`,
			[]string{`{}`, `{"x":1,"y":-2}`},
			[]string{`{"x":"s"}`, `[]`},
		},
		{ // code points, escapes, surrogate pairs
			`{"type":"string","minLength":2,"maxLength":2}`,
			[]string{`"ab"`, `"\u00e9x"`, `"😀x"`, `"\ud83d\ude00x"`, `"\\\""`, `"é€"`},
			[]string{`"a"`, `"abc"`, `"\ud83dx"`, "\"a\nb\"", "\"a\x01\"", `"\x"`, `"\ude00x"`},
		},
		{
			`{"enum":["a",1,2.50,null,{"k":[1,"x"]},[true]],"type":["string","object","null"]}`,
			[]string{`"a"`, `null`, `{"k":[1,"x"]}`},
			[]string{`1`, `2.50`, `[true]`, `"b"`, `{"k": [1, "x"]}`},
		},
		{`{"const":"é\"\n"}`, []string{`"é\"\n"`}, []string{`"é"`}},
		{`{"type":"integer","minimum":-12,"exclusiveMaximum":120}`, []string{"-12", "-1", "0", "7", "119"}, []string{"-13", "120", "01", "-0", "1.0", "1e2"}},
		{`{"type":"number","exclusiveMinimum":0}`, []string{"1", "0.5", "0.001e-3", "12.0"}, []string{"0", "0.0", "-1", "0.000"}},
		{`{"type":"number","minimum":0}`, []string{"0", "0.0", "3e5"}, []string{"-1", "-0.5"}},
		{`{"type":"number"}`, []string{"0", "-0", "-12.5e+10", "1E-99"}, []string{"01", "1.", ".5", "1e100", "+1", "12345678901234567"}},
		{`{"type":"string","format":"date"}`, []string{`"2024-02-28"`, `"1999-12-31"`, `"2023-04-30"`}, []string{`"2024-02-29"`, `"2023-04-31"`, `"2023-13-01"`, `"2023-1-01"`}},
		{`{"type":"string","format":"date-time"}`, []string{`"2024-01-31T23:59:59Z"`, `"2024-01-31t00:00:00.123+05:30"`}, []string{`"2024-01-31T24:00:00Z"`, `"2024-01-31T12:00:00"`, `"2024-01-31T12:00:60Z"`}},
		{`{"type":"string","format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`, `"123e4567-e89b-12d3-a456-42661417400g"`}},
		{`{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false,"minItems":1}`, []string{`["a"]`, `["a",1]`, `[ "a" , 1 ]`}, []string{`[]`, `[1]`, `["a",1,2]`}},
		{`{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3}`, []string{`[true,false]`, `[true,true,false]`}, []string{`[true]`, `[true,true,true,true]`}},
		{`{"type":"array"}`, []string{`[]`, `[1,"a",{"b":[null]}]`}, []string{`[,]`}},
		{ // recursion through $ref
			`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/node"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
			[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":{"v":3,"next":null}}}`},
			[]string{`{"v":1}`, `{"v":1,"next":{"v":2}}`},
		},
		{`{"$ref":"#/definitions/x","definitions":{"x":{"type":"boolean"}}}`, []string{"true"}, []string{"1"}},
		{`{"type":["string","null"],"maxLength":1}`, []string{`"a"`, `null`}, []string{`"ab"`}},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"description":"d","title":"t"}`, []string{`{"a":1}`}, []string{`{"a":1,"b":2}`}},
		{ // whitespace is bounded
			`{"type":"object","properties":{"a":{"type":"integer"}}}`,
			[]string{"{\n" + strings.Repeat(" ", 20) + `"a": 1}`, "{\t\"a\":\t1}"},
			[]string{"{\n" + strings.Repeat(" ", 21) + `"a": 1}`, `{  "a":1}`, "{\n\n\"a\":1}", ` {"a":1}`, `{"a":1} `},
		},
		{`true`, []string{`1`, `"x"`, `{"a":[]}`, `null`}, []string{`nul`, `{"a"}`}},
	} {
		g := mustSchema(t, tc.schema)
		for _, s := range tc.yes {
			if !accepts(g, v, s) {
				t.Errorf("%s: rejects %q", tc.schema, s)
			}
		}
		for _, s := range tc.no {
			if accepts(g, v, s) {
				t.Errorf("%s: accepts %q", tc.schema, s)
			}
		}
	}
}

func TestIntegerRanges(t *testing.T) {
	v, _ := synthVocab()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		lo := rng.Int64N(3000) - 1500
		hi := lo + rng.Int64N(2500)
		g := mustSchema(t, fmt.Sprintf(`{"type":"integer","minimum":%d,"maximum":%d}`, lo, hi))
		for n := lo - 30; n <= hi+30; n += 1 + rng.Int64N(7) {
			if got, want := accepts(g, v, strconv.FormatInt(n, 10)), lo <= n && n <= hi; got != want {
				t.Fatalf("[%d, %d]: %d accepted %v", lo, hi, n, got)
			}
		}
	}
}

func TestJSONObject(t *testing.T) {
	v, _ := synthVocab()
	g := JSONObject()
	for _, s := range []string{`{}`, `{"a":[1,2,{"b":null}]}`, `{"a\"b":"\u00e9"}`, "{\n  \"k\": -1.5e3\n}"} {
		if !accepts(g, v, s) {
			t.Errorf("rejects %q", s)
		}
	}
	for _, s := range []string{`[]`, `"x"`, `{"a":1,}`, `{a:1}`, `{"a":01}`, `{"a":1}{}`} {
		if accepts(g, v, s) {
			t.Errorf("accepts %q", s)
		}
	}
}

// genSchema draws a JSON schema (as JSON text) from the supported subset.
// Strings and arrays get short bounds often enough that random outputs end.
type schemaGen struct {
	t     *rapid.T
	defs  map[string]string
	inDef bool // drawing a definition: no references (a def that is only a reference to itself has no values)
}

func (g *schemaGen) str(s string) string { b, _ := json.Marshal(s); return string(b) }

var propNames = []string{"a", "b", "name", "é", "a b", `x"y`, "~/", "id", "2"}

var enumPool = []string{`"a"`, `"é\"x"`, `""`, `"\u0000"`, `1`, `2.5`, `-3e2`, `true`, `null`, `{"k":[1,"x"]}`, `[1,2]`, `"name"`, `0`}

func (g *schemaGen) schema(depth int) string {
	t := g.t
	kinds := []string{"string", "string", "integer", "number", "boolean", "null", "enum", "const", "typelist", "format", "any"}
	if depth < 3 {
		kinds = append(kinds, "object", "object", "array", "array", "anyOf", "oneOf", "allOf")
		if !g.inDef {
			kinds = append(kinds, "ref")
		}
	}
	switch rapid.SampledFrom(kinds).Draw(t, "kind") {
	case "string":
		parts := []string{`"type":"string"`}
		if rapid.IntRange(0, 3).Draw(t, "bounded") > 0 {
			hi := rapid.IntRange(0, 6).Draw(t, "maxLength")
			parts = append(parts, fmt.Sprintf(`"maxLength":%d`, hi))
			if rapid.Bool().Draw(t, "hasMin") {
				parts = append(parts, fmt.Sprintf(`"minLength":%d`, rapid.IntRange(0, hi).Draw(t, "minLength")))
			}
		}
		if rapid.Bool().Draw(t, "described") {
			parts = append(parts, `"description":"some text"`)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case "integer":
		parts := []string{`"type":"integer"`}
		lo := rapid.IntRange(-1000, 1000).Draw(t, "lo")
		switch rapid.IntRange(0, 4).Draw(t, "intBounds") {
		case 1:
			parts = append(parts, fmt.Sprintf(`"minimum":%d`, lo))
		case 2:
			parts = append(parts, fmt.Sprintf(`"maximum":%d`, lo))
		case 3:
			parts = append(parts, fmt.Sprintf(`"minimum":%d,"maximum":%d`, lo, lo+rapid.IntRange(0, 3000).Draw(t, "span")))
		case 4:
			parts = append(parts, fmt.Sprintf(`"exclusiveMinimum":%d.5,"exclusiveMaximum":%d`, lo, lo+rapid.IntRange(2, 50).Draw(t, "span")))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case "number":
		return rapid.SampledFrom([]string{`{"type":"number"}`, `{"type":"number","minimum":0}`, `{"type":"number","exclusiveMinimum":0}`}).Draw(t, "number")
	case "boolean":
		return `{"type":"boolean"}`
	case "null":
		return `{"type":"null"}`
	case "enum":
		vals := rapid.SliceOfNDistinct(rapid.SampledFrom(enumPool), 1, 4, func(s string) string { return s }).Draw(t, "enum")
		return `{"enum":[` + strings.Join(vals, ",") + `]}`
	case "const":
		return `{"const":` + rapid.SampledFrom(enumPool).Draw(t, "const") + `}`
	case "typelist":
		return rapid.SampledFrom([]string{`{"type":["string","null"],"maxLength":3}`, `{"type":["integer","boolean"]}`, `{"type":["number","string"],"maxLength":2}`, `{"type":["array","null"],"maxItems":2,"items":{"type":"integer"}}`}).Draw(t, "typelist")
	case "format":
		return `{"type":"string","format":` + g.str(rapid.SampledFrom([]string{"date", "time", "date-time", "uuid"}).Draw(t, "format")) + `}`
	case "any":
		return rapid.SampledFrom([]string{`{}`, `true`, `{"description":"anything"}`}).Draw(t, "any")
	case "object":
		names := rapid.SliceOfNDistinct(rapid.SampledFrom(propNames), 0, 3, func(s string) string { return s }).Draw(t, "props")
		var props, req []string
		for _, n := range names {
			props = append(props, g.str(n)+":"+g.schema(depth+1))
			if rapid.Bool().Draw(t, "required") {
				req = append(req, g.str(n))
			}
		}
		parts := []string{`"type":"object"`}
		if len(names) > 0 || rapid.Bool().Draw(t, "emptyProps") {
			parts = append(parts, `"properties":{`+strings.Join(props, ",")+`}`)
		}
		if len(req) > 0 {
			parts = append(parts, `"required":[`+strings.Join(req, ",")+`]`)
		}
		switch rapid.IntRange(0, 4).Draw(t, "additional") {
		case 0, 1:
			parts = append(parts, `"additionalProperties":false`)
		case 2:
			parts = append(parts, `"additionalProperties":true`)
		case 3:
			parts = append(parts, `"additionalProperties":{"type":"integer"}`)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case "array":
		parts := []string{`"type":"array"`}
		hi := rapid.IntRange(0, 3).Draw(t, "maxItems")
		parts = append(parts, fmt.Sprintf(`"maxItems":%d`, hi))
		prefix := 0
		if rapid.IntRange(0, 3).Draw(t, "prefix") == 0 {
			parts = append(parts, `"prefixItems":[`+g.schema(depth+1)+`]`)
			prefix = 1
		}
		most := hi
		switch rapid.IntRange(0, 3).Draw(t, "itemsKind") {
		case 0:
		case 1:
			parts = append(parts, `"items":false`)
			most = min(hi, prefix)
		default:
			parts = append(parts, `"items":`+g.schema(depth+1))
		}
		if rapid.Bool().Draw(t, "hasMinItems") {
			parts = append(parts, fmt.Sprintf(`"minItems":%d`, rapid.IntRange(0, most).Draw(t, "minItems")))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case "anyOf":
		n := rapid.IntRange(1, 3).Draw(t, "branches")
		var bs []string
		for range n {
			bs = append(bs, g.schema(depth+1))
		}
		return `{"anyOf":[` + strings.Join(bs, ",") + `],"description":"one of these"}`
	case "oneOf":
		// Branches of distinct types, so that exactly one matches.
		types := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"string", "integer", "boolean", "null", "array"}), 1, 3, func(s string) string { return s }).Draw(t, "oneOfTypes")
		var bs []string
		for _, ty := range types {
			switch ty {
			case "string":
				bs = append(bs, `{"type":"string","maxLength":4}`)
			case "array":
				bs = append(bs, `{"type":"array","maxItems":2,"items":{"type":"integer"}}`)
			default:
				bs = append(bs, `{"type":"`+ty+`"}`)
			}
		}
		return `{"oneOf":[` + strings.Join(bs, ",") + `]}`
	case "allOf":
		return `{"allOf":[` + g.schema(depth+1) + `]}`
	case "ref":
		name := rapid.SampledFrom([]string{"thing", "list", "tree"}).Draw(t, "def")
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = "" // reserve: a recursive def can refer to itself
			switch name {
			case "tree": // recursive, ends with probability one
				g.defs[name] = `{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"kids":{"type":"array","maxItems":2,"items":{"$ref":"#/$defs/tree"}}},"required":["v"],"additionalProperties":false}`
			default:
				g.inDef = true
				g.defs[name] = g.schema(depth + 1)
				g.inDef = false
			}
		}
		return `{"$ref":"#/$defs/` + name + `"}`
	}
	panic("unreachable")
}

func genSchema(t *rapid.T) string {
	g := &schemaGen{t: t, defs: map[string]string{}}
	body := g.schema(0)
	if len(g.defs) == 0 {
		return body
	}
	var defs []string
	for _, name := range []string{"thing", "list", "tree"} {
		if d, ok := g.defs[name]; ok {
			defs = append(defs, g.str(name)+":"+d)
		}
	}
	// Wrap so that $defs sits at the root the references point into.
	return `{"allOf":[` + body + `],"$defs":{` + strings.Join(defs, ",") + `}}`
}

func compileJudge(t tb, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("judge cannot read %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("judge cannot compile %s: %v", schema, err)
	}
	return sch
}

// TestSchemaOutputsValidate: random schemas, random outputs (each token
// uniform among the allowed ones); every finished output is JSON that the
// jsonschema package, an independent implementation, finds valid.
func TestSchemaOutputsValidate(t *testing.T) {
	synth, _ := synthVocab()
	q := qwen(t)
	var runs, finished int
	rapid.Check(t, func(rt *rapid.T) {
		schema := genSchema(rt)
		g, err := FromJSONSchema([]byte(schema))
		if err != nil {
			rt.Fatalf("FromJSONSchema(%s): %v", schema, err)
		}
		judge := compileJudge(rt, schema)
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 3))
		v := synth
		if rapid.IntRange(0, 3).Draw(rt, "qwen") == 0 {
			v = q.vocab
		}
		for range 3 {
			runs++
			out, done := walk(rt, g.NewMatcher(v), v, rng, 300, nil)
			if !done {
				continue
			}
			finished++
			var x any
			if err := json.Unmarshal(out, &x); err != nil {
				rt.Fatalf("schema %s: output %q is not JSON: %v", schema, out, err)
			}
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
			if err != nil {
				rt.Fatal(err)
			}
			if err := judge.Validate(inst); err != nil {
				rt.Fatalf("schema %s:\ngrammar:\n%s\noutput %s is invalid: %v", schema, g, out, err)
			}
		}
	})
	t.Logf("%d of %d outputs finished within 300 tokens", finished, runs)
	if finished*2 < runs {
		t.Errorf("only %d of %d outputs finished: the test checks too little", finished, runs)
	}
}
