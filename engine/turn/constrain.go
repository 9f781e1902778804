package turn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/grammar"
)

// The grammars of an output format and those the tool choice makes in the
// model's own tool-call markup.

// SchemaGrammar compiles a JSON schema; an invalid or unsupported one is
// a FieldError naming param, the place in the schema and the keyword.
func SchemaGrammar(param string, schema json.RawMessage) (*grammar.Grammar, error) {
	g, err := grammar.FromJSONSchema(schema)
	if err != nil {
		return nil, grammarError(param, err)
	}
	return g, nil
}

func grammarError(param string, err error) error {
	var se *grammar.SchemaError
	if errors.As(err, &se) {
		return fieldErr(param, "%s: %v", param, err)
	}
	return fieldErr(param, "%v", err)
}

// toolDef is what a call grammar needs of one tool (Validate makes
// them; parameters absent or {} stand as {"type": "object"}).
type toolDef struct {
	name   string
	params json.RawMessage // the parameters schema; {"type": "object"} when absent
}

// gbnfLiteral quotes s as a GBNF string literal.
func gbnfLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// callRule writes rule name: one call to tool t in the template's markup
// with arguments args (a rule of argsGrammar), from after the text skip
// (what is forced or triggered before the grammar starts) to the end of
// "</tool_call>".
func callRule(m ToolMarkup, b *strings.Builder, name string, t toolDef, args, skip string) error {
	head := strings.Replace(m.Named, ProbeName, t.name, 1)
	if !strings.HasPrefix(head, skip) {
		return fmt.Errorf("the call markup %q does not start with %q", head, skip)
	}
	fmt.Fprintf(b, "%s ::= %s %s %s\n", name, gbnfLiteral(head[len(skip):]), args, gbnfLiteral(m.Close))
	return nil
}

// argsGrammar writes the rules of tool i's arguments and returns the name
// of their rule: a JSON object (Qwen3) or XML parameters (Qwen3.5).
func argsGrammar(m ToolMarkup, b *strings.Builder, i int, t toolDef) (string, error) {
	param := fmt.Sprintf("tools[%d].function.parameters", i)
	prefix := fmt.Sprintf("t%d-", i)
	if !m.XML {
		rules, root, err := toolSchemaGBNF(t.params, prefix)
		if err != nil {
			return "", grammarError(param, err)
		}
		b.WriteString(rules)
		return root, nil
	}
	// XML parameters, in the schema's order: strings are raw text without
	// the parameter's closing tag, other values JSON, as the template
	// writes them with tojson.
	var schema struct {
		Properties orderedProps               `json:"properties"`
		Required   []string                   `json:"required"`
		Defs       map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(t.params, &schema); err != nil {
		return "", fieldErr(param, "%s: %v", param, err)
	}
	root := prefix + "xml-args"
	fmt.Fprintf(b, "%s ::=", root)
	var more strings.Builder
	for j, p := range schema.Properties {
		open := gbnfLiteral(m.ParamOpen + p.name + m.ParamMid)
		value := "xml-text0"
		var typ struct {
			Type  string            `json:"type"`
			Enum  []json.RawMessage `json:"enum"`
			Const json.RawMessage   `json:"const"`
		}
		_ = json.Unmarshal(p.schema, &typ)
		if lits, ok := rawStrings(typ.Enum, typ.Const); ok {
			value = "(" + strings.Join(lits, " | ") + ")" // strings are written raw
		} else if typ.Type != "string" {
			sub := p.schema
			if len(schema.Defs) > 0 {
				sub = withDefs(p.schema, schema.Defs)
			}
			rules, vroot, err := toolSchemaGBNF(sub, fmt.Sprintf("%sp%d-", prefix, j))
			if err != nil {
				return "", grammarError(param+".properties."+p.name, err)
			}
			more.WriteString(rules)
			value = vroot
		}
		item := fmt.Sprintf("%s %s %s", open, value, gbnfLiteral(m.ParamClose))
		if slices.Contains(schema.Required, p.name) {
			fmt.Fprintf(b, " %s", item)
		} else {
			fmt.Fprintf(b, " (%s)?", item)
		}
	}
	if len(schema.Properties) == 0 {
		b.WriteString(` ""`)
	}
	b.WriteString("\n")
	b.WriteString(more.String())
	return root, nil
}

// rawStrings returns an enum's (or a const's) values as GBNF literals of
// their raw text when they are all strings.
func rawStrings(enum []json.RawMessage, cnst json.RawMessage) ([]string, bool) {
	vals := enum
	if len(cnst) > 0 {
		vals = []json.RawMessage{cnst}
	}
	if len(vals) == 0 {
		return nil, false
	}
	var lits []string
	for _, v := range vals {
		var str string
		if json.Unmarshal(v, &str) != nil {
			return nil, false
		}
		lits = append(lits, gbnfLiteral(str))
	}
	return lits, true
}

// withDefs adds the parameters' $defs to a property's schema, so that its
// $refs resolve when it is compiled alone.
func withDefs(schema json.RawMessage, defs map[string]json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(schema, &obj) != nil || obj == nil {
		return schema
	}
	d, _ := json.Marshal(defs)
	obj["$defs"] = d
	out, _ := json.Marshal(obj)
	return out
}

// orderedProps reads a JSON object's members in order.
type orderedProps []struct {
	name   string
	schema json.RawMessage
}

func (o *orderedProps) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("properties must be an object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*o = append(*o, struct {
			name   string
			schema json.RawMessage
		}{t.(string), v})
	}
	return nil
}

// notContaining writes rules name0..name(k-1) of the texts that do not
// contain w (ASCII), as the states of a Knuth-Morris-Pratt matcher for w:
// rule i is the rest of the text after a tail that matched i bytes of w.
func notContaining(b *strings.Builder, name, w string) {
	k := len(w)
	fail := make([]int, k+1) // KMP failure function
	for i := 1; i < k; i++ {
		j := fail[i]
		for j > 0 && w[i] != w[j] {
			j = fail[j]
		}
		if w[i] == w[j] {
			j++
		}
		fail[i+1] = j
	}
	next := func(i int, c byte) int {
		for i > 0 && w[i] != c {
			i = fail[i]
		}
		if w[i] == c {
			i++
		}
		return i
	}
	var set []byte
	for i := 0; i < k; i++ {
		if !strings.ContainsRune(string(set), rune(w[i])) {
			set = append(set, w[i])
		}
	}
	class := func(c byte) string {
		switch c {
		case '\n':
			return `\n`
		case '\\', ']', '^', '-', '[':
			return `\` + string(c)
		}
		return string(c)
	}
	var others strings.Builder
	for _, c := range set {
		others.WriteString(class(c))
	}
	for i := 0; i < k; i++ {
		fmt.Fprintf(b, "%s%d ::= \"\" | [^%s] %s0", name, i, others.String(), name)
		for _, c := range set {
			if n := next(i, c); n < k {
				fmt.Fprintf(b, " | %s %s%d", gbnfLiteral(string(c)), name, n)
			}
		}
		b.WriteString("\n")
	}
}

// toolGrammar is the grammar of tool calls after skip (the forced or
// triggered markup): one call to any of tools (to the named one when only
// it is given), then, when more may follow, further calls each opened by
// sep.
func toolGrammar(m ToolMarkup, tools []toolDef, skip, sep string, many bool) (*grammar.Grammar, error) {
	g, err := buildToolGrammar(m, tools, skip, sep, many, false)
	if err != nil && strings.Contains(err.Error(), "too large") {
		// Length bounds are expanded into repetitions: many of them
		// (Claude Code's tools) make a grammar over the compiler's limit.
		// Then they are left out (schemarelax.go).
		g, err = buildToolGrammar(m, tools, skip, sep, many, true)
	}
	return g, err
}

func buildToolGrammar(m ToolMarkup, tools []toolDef, skip, sep string, many, dropLengths bool) (*grammar.Grammar, error) {
	if dropLengths {
		relaxed := make([]toolDef, len(tools))
		for i, t := range tools {
			relaxed[i] = toolDef{name: t.name, params: dropKeywords(t.params, lengthKeywords)}
		}
		tools = relaxed
	}
	var b strings.Builder
	var alts, nextAlts []string
	for i, t := range tools {
		args, err := argsGrammar(m, &b, i, t)
		if err != nil {
			return nil, err
		}
		name := "call" + strconv.Itoa(i)
		if err := callRule(m, &b, name, t, args, skip); err != nil {
			return nil, err
		}
		alts = append(alts, name)
		if many {
			next := "next" + strconv.Itoa(i)
			if err := callRule(m, &b, next, t, args, m.Open); err != nil {
				return nil, err
			}
			nextAlts = append(nextAlts, next)
		}
	}
	if m.XML {
		// A raw value is any text without the parameter's closing tag.
		notContaining(&b, "xml-text", strings.TrimRight(m.ParamClose, "\n"))
	}
	root := "root ::= (" + strings.Join(alts, " | ") + ")"
	if many {
		root += " (" + gbnfLiteral(sep+m.Open) + " (" + strings.Join(nextAlts, " | ") + "))*"
	}
	b.WriteString(root + "\n")
	g, err := grammar.ParseGBNF(b.String())
	if err != nil {
		return nil, fmt.Errorf("the tool-call grammar does not compile: %w", err)
	}
	return g, nil
}

// toolConstraint is the constraint the tool choice puts on a chat
// answer, in the template's own call markup: after the forced markup for
// "required" and a named function, lazily after the call opener for
// "auto". nil when tool calls are not constrained.
func (p *Pipeline) toolConstraint(req *Request, c *checked) (*engine.Constraint, error) {
	mode := req.ToolChoice.Mode
	if !p.canForce || len(req.Tools) == 0 || mode == ToolNone {
		return nil, nil
	}
	defs := c.tools
	many := req.ParallelToolCalls && mode != ToolNamed
	m := p.markup
	switch mode {
	case ToolNamed:
		var one []toolDef
		for _, d := range defs {
			if d.name == req.ToolChoice.Name {
				one = append(one, d)
			}
		}
		g, err := toolGrammar(m, one, m.Prefix(req.ToolChoice.Name), "\n", false)
		if err != nil {
			return nil, err
		}
		return &engine.Constraint{Grammar: g}, nil
	case ToolRequired:
		g, err := toolGrammar(m, defs, m.Open, "\n", many)
		if err != nil {
			return nil, err
		}
		return &engine.Constraint{Grammar: g}, nil
	}
	trigger := strings.TrimSpace(m.Open)
	g, err := toolGrammar(m, defs, trigger, "\n", false)
	if err != nil {
		return nil, err
	}
	return &engine.Constraint{Grammar: g, Trigger: trigger}, nil
}
