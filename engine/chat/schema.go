package chat

import (
	"encoding/json"
	"strconv"
	"strings"
)

// toolSchemas maps function name → parameter name → the JSON types the
// tool's schema declares for it, read from a request's tools.
type toolSchemas map[string]map[string][]string

// readToolSchemas reads what it can; malformed entries are skipped
// (Validate is the place that reports them).
func readToolSchemas(tools []json.RawMessage) toolSchemas {
	out := toolSchemas{}
	for _, raw := range tools {
		var tool struct {
			Function *functionSchema `json:"function"`
			functionSchema
		}
		if json.Unmarshal(raw, &tool) != nil {
			continue
		}
		fn := &tool.functionSchema
		if tool.Function != nil {
			fn = tool.Function
		}
		if fn.Name == "" {
			continue
		}
		params := map[string][]string{}
		for name, prop := range fn.Parameters.Properties {
			params[name] = prop.types()
		}
		out[fn.Name] = params
	}
	return out
}

type functionSchema struct {
	Name       string `json:"name"`
	Parameters struct {
		Properties map[string]propertySchema `json:"properties"`
	} `json:"parameters"`
}

type propertySchema struct {
	Type  json.RawMessage  `json:"type"`
	AnyOf []propertySchema `json:"anyOf"`
	OneOf []propertySchema `json:"oneOf"`
	Enum  []any            `json:"enum"`
}

// types lists the declared types: "type" as a string or a list, else those
// of anyOf/oneOf, else the kinds of the enum's values.
func (p propertySchema) types() []string {
	var one string
	if json.Unmarshal(p.Type, &one) == nil && one != "" {
		return []string{strings.ToLower(one)}
	}
	var many []string
	if json.Unmarshal(p.Type, &many) == nil && len(many) > 0 {
		for i := range many {
			many[i] = strings.ToLower(many[i])
		}
		return many
	}
	var out []string
	for _, sub := range append(p.AnyOf, p.OneOf...) {
		out = append(out, sub.types()...)
	}
	if len(out) == 0 {
		for _, v := range p.Enum {
			switch v.(type) {
			case string:
				out = append(out, "string")
			case float64:
				out = append(out, "number")
			case bool:
				out = append(out, "boolean")
			case nil:
				out = append(out, "null")
			}
		}
	}
	return out
}

// paramJSON turns the text of an XML-form parameter into the JSON the
// tool's schema asks for. Qwen3.5's template writes non-string history values
// with Python's str() (True, None) or tojson (objects, lists), and the model
// writes them the same way. A text that does not fit any declared type, or
// a parameter with no declared type, stays a string.
func paramJSON(types []string, text string) string {
	var b strings.Builder
	try := func(t string) bool {
		switch t {
		case "null":
			if text == "null" || text == "None" {
				b.WriteString("null")
				return true
			}
		case "integer", "int":
			if isJSONInteger(text) {
				b.WriteString(text)
				return true
			}
		case "number", "float":
			if isJSONNumber(text) {
				b.WriteString(text)
				return true
			}
			if f, err := strconv.ParseFloat(text, 64); err == nil && !strings.ContainsAny(text, "xXnN_") {
				b.WriteString(pyFloatJSON(f))
				return true
			}
		case "boolean", "bool":
			switch strings.ToLower(text) {
			case "true":
				b.WriteString("true")
				return true
			case "false":
				b.WriteString("false")
				return true
			}
		case "object", "dict", "array", "list":
			v, err := decodeJSON([]byte(text))
			if err != nil {
				return false
			}
			_, isList := v.(list)
			if isList != (t == "array" || t == "list") {
				return false
			}
			s, err := pyDumps(v, defaultDumpOptions())
			if err != nil {
				return false
			}
			b.WriteString(s)
			return true
		}
		return false
	}
	// Every non-string type first: a declared string always fits, so it is
	// the fallback.
	for _, t := range types {
		if t != "string" && try(t) {
			return b.String()
		}
	}
	pyQuote(&b, text, false)
	return b.String()
}

func isJSONInteger(s string) bool {
	return isJSONNumber(s) && !strings.ContainsAny(s, ".eE")
}

// isJSONNumber reports whether s is exactly one JSON number.
func isJSONNumber(s string) bool {
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		return false
	}
	var sc jsonScanner
	for i := 0; i < len(s); i++ {
		if sc.step(s[i]) == scanError {
			return false
		}
	}
	return sc.endable()
}
