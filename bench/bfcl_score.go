// The BFCL scorer: BFCL's AST check of a model's tool calls against a
// case's possible answers, and the well-formedness check.

package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// BFCLVerdict is how one answer scored.
type BFCLVerdict struct {
	// Scored is false when the case has no ground truth and its subset is
	// not one whose answer is known without it (irrelevance, relevance).
	Scored  bool
	Correct bool
	Reason  string // why not correct
}

// ScoreBFCL scores the calls an answer made. Irrelevance subsets are
// correct when no call is made, relevance subsets when one is; other cases
// need PossibleAnswer and are scored by BFCL's AST rules: as many calls as
// expected (matched in any order for parallel cases), each naming the
// expected function, with every required parameter present, no parameter
// the answer does not allow, each value among the allowed ones (strings
// compared after BFCL's standardisation) and of the schema's type.
func ScoreBFCL(c *BFCLCase, calls []chat.ToolCall) BFCLVerdict {
	switch {
	case strings.Contains(c.Subset, "irrelevance"):
		if len(calls) == 0 {
			return BFCLVerdict{Scored: true, Correct: true}
		}
		return BFCLVerdict{Scored: true, Reason: fmt.Sprintf("made %d call(s) where none fits", len(calls))}
	case strings.Contains(c.Subset, "relevance"):
		if len(calls) > 0 {
			return BFCLVerdict{Scored: true, Correct: true}
		}
		return BFCLVerdict{Scored: true, Reason: "made no call"}
	case c.PossibleAnswer == nil:
		return BFCLVerdict{}
	}
	if len(calls) != len(c.PossibleAnswer) {
		return BFCLVerdict{Scored: true, Reason: fmt.Sprintf("made %d call(s), want %d", len(calls), len(c.PossibleAnswer))}
	}
	schemas := toolParams(c.Tools)
	used := make([]bool, len(calls))
	for i, want := range c.PossibleAnswer {
		var firstErr error
		found := false
		for j, call := range calls {
			if used[j] {
				continue
			}
			err := matchCall(want, call, schemas)
			if err == nil {
				used[j], found = true, true
				break
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		if !found {
			if len(calls) == 1 {
				return BFCLVerdict{Scored: true, Reason: firstErr.Error()}
			}
			return BFCLVerdict{Scored: true, Reason: fmt.Sprintf("expected call %d matches no call made (first mismatch: %v)", i, firstErr)}
		}
	}
	return BFCLVerdict{Scored: true, Correct: true}
}

// paramSchema is what the scorer needs of a tool's parameters.
type paramSchema struct {
	required []string
	types    map[string]string // parameter → JSON schema type
}

func toolParams(tools []json.RawMessage) map[string]paramSchema {
	out := map[string]paramSchema{}
	for _, raw := range tools {
		var t struct {
			Function struct {
				Name       string `json:"name"`
				Parameters struct {
					Properties map[string]struct {
						Type any `json:"type"`
					} `json:"properties"`
					Required []string `json:"required"`
				} `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) != nil || t.Function.Name == "" {
			continue
		}
		ps := paramSchema{required: t.Function.Parameters.Required, types: map[string]string{}}
		for name, p := range t.Function.Parameters.Properties {
			if s, ok := p.Type.(string); ok {
				ps.types[name] = s
			}
		}
		out[funcKey(t.Function.Name)] = ps
	}
	return out
}

// funcKey compares function names as BFCL does for OpenAI-style models,
// which may not use dots in names.
func funcKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

func matchCall(want map[string]map[string][]any, call chat.ToolCall, schemas map[string]paramSchema) error {
	if len(want) != 1 {
		return fmt.Errorf("possible answer entry names %d functions, want 1", len(want))
	}
	for name, params := range want {
		if funcKey(call.Function.Name) != funcKey(name) {
			return fmt.Errorf("called %q, want %q", call.Function.Name, name)
		}
		args, err := decodeArgs(call.Function.Arguments)
		if err != nil {
			return fmt.Errorf("%s: arguments are not a JSON object: %v", name, err)
		}
		schema := schemas[funcKey(name)]
		for _, r := range schema.required {
			if _, ok := args[r]; !ok {
				return fmt.Errorf("%s: required parameter %q missing", name, r)
			}
		}
		for k := range args {
			if _, ok := params[k]; !ok {
				return fmt.Errorf("%s: unexpected parameter %q", name, k)
			}
		}
		keys := make([]string, 0, len(params))
		for k := range params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			allowed := params[k]
			v, ok := args[k]
			if !ok {
				if !allowsAbsent(allowed) {
					return fmt.Errorf("%s: parameter %q missing", name, k)
				}
				continue
			}
			if t := schema.types[k]; t != "" && !hasType(v, t) {
				return fmt.Errorf("%s: parameter %q: %s is not of type %s", name, k, compact(v), t)
			}
			if !amongAllowed(v, allowed) {
				return fmt.Errorf("%s: parameter %q: %s is not among the allowed values %s", name, k, compact(v), compact(allowed))
			}
		}
	}
	return nil
}

func decodeArgs(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("null")
	}
	return m, nil
}

func allowsAbsent(allowed []any) bool {
	for _, a := range allowed {
		if s, ok := a.(string); ok && s == "" {
			return true
		}
	}
	return false
}

// hasType checks a decoded JSON value against a JSON-schema type name (as
// BFCL's OpenAI-style tool schemas write them; "float", "dict" and "tuple"
// are BFCL's own).
func hasType(v any, t string) bool {
	switch t {
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case "number", "float":
		_, ok := v.(json.Number)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array", "tuple":
		_, ok := v.([]any)
		return ok
	case "object", "dict":
		_, ok := v.(map[string]any)
		return ok
	}
	return true // "any" and types this scorer does not know
}

func amongAllowed(v any, allowed []any) bool {
	for _, a := range allowed {
		if sameValue(v, a) {
			return true
		}
	}
	return false
}

// sameValue compares a model's value with an allowed one: strings after
// BFCL's standardize_string, numbers by value, lists element by element,
// objects key by key (an allowed object's values may themselves be lists of
// allowed values, as BFCL writes nested answers).
func sameValue(v, a any) bool {
	switch a := a.(type) {
	case string:
		s, ok := v.(string)
		return ok && standardize(s) == standardize(a)
	case json.Number:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		x, err1 := n.Float64()
		y, err2 := a.Float64()
		return err1 == nil && err2 == nil && (x == y || math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y)))
	case bool:
		b, ok := v.(bool)
		return ok && b == a
	case nil:
		return v == nil
	case []any:
		l, ok := v.([]any)
		if !ok || len(l) != len(a) {
			return false
		}
		for i := range l {
			if !sameValue(l[i], a[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for k := range m {
			if _, ok := a[k]; !ok {
				return false
			}
		}
		for k, want := range a {
			got, present := m[k]
			if alts, isList := want.([]any); isList {
				if !present {
					if !allowsAbsent(alts) {
						return false
					}
					continue
				}
				if !amongAllowed(got, alts) && !sameValue(got, want) {
					return false
				}
				continue
			}
			if !present || !sameValue(got, want) {
				return false
			}
		}
		return true
	}
	return false
}

// standardize is BFCL's standardize_string: drop spaces and , . / - _ * ^,
// lower-case, and read single quotes as double quotes.
func standardize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case ' ', ',', '.', '/', '-', '_', '*', '^':
			continue
		case '\'':
			r = '"'
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func wellFormed(calls []chat.ToolCall, schemas map[string]paramSchema) bool {
	for _, c := range calls {
		s, ok := schemas[funcKey(c.Function.Name)]
		if !ok {
			return false
		}
		args, err := decodeArgs(c.Function.Arguments)
		if err != nil {
			return false
		}
		for _, r := range s.required {
			if _, ok := args[r]; !ok {
				return false
			}
		}
	}
	return len(calls) > 0
}
