package web

import (
	"encoding/json"
	"strings"

	"github.com/edgellmd/edgellmd/engine/turn"
)

// The chat and completion fields that hold the output to a language:
// OpenAI's response_format, llama.cpp's grammar and json_schema. They are
// read into a turn.Format, compiled by turn.Request.Validate.

// responseFormat is OpenAI's response_format, with llama.cpp's "schema"
// on json_object.
type responseFormat struct {
	Type       string          `json:"type"`
	Schema     json.RawMessage `json:"schema"` // llama.cpp: json_object with a schema
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// decodeConstraint reads response_format, and llama.cpp's grammar and
// json_schema fields; at most one may constrain the output. nil: none.
func decodeConstraint(fields map[string]json.RawMessage) (*turn.Format, error) {
	var f *turn.Format
	set := func(param string, nf *turn.Format) error {
		if f != nil {
			from := strings.SplitN(f.Field, ".", 2)[0]
			return badRequest(param, "%s and %s both constrain the output: send one", from, param)
		}
		f = nf
		return nil
	}
	if raw, ok := fields["response_format"]; ok && !isNull(raw) {
		var rf responseFormat
		if err := json.Unmarshal(raw, &rf); err != nil {
			return nil, jsonError("response_format", err)
		}
		switch rf.Type {
		case "", "text":
		case "json_object":
			nf := &turn.Format{Kind: turn.FormatJSONObject, Field: "response_format"}
			if len(rf.Schema) > 0 && !isNull(rf.Schema) {
				nf = &turn.Format{Kind: turn.FormatJSONSchema, Schema: rf.Schema, Field: "response_format.schema"}
			}
			if err := set("response_format", nf); err != nil {
				return nil, err
			}
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || isNull(rf.JSONSchema.Schema) {
				return nil, badRequest("response_format", "response_format json_schema needs json_schema.schema")
			}
			if err := set("response_format", &turn.Format{Kind: turn.FormatJSONSchema, Schema: rf.JSONSchema.Schema,
				Field: "response_format.json_schema.schema"}); err != nil {
				return nil, err
			}
		default:
			return nil, badRequest("response_format", "response_format type must be \"text\", \"json_object\" or \"json_schema\", got %q", rf.Type)
		}
	}
	if raw, ok := fields["json_schema"]; ok && !isNull(raw) {
		if err := set("json_schema", &turn.Format{Kind: turn.FormatJSONSchema, Schema: raw, Field: "json_schema"}); err != nil {
			return nil, err
		}
	}
	if raw, ok := fields["grammar"]; ok && !isNull(raw) {
		var src string
		if err := json.Unmarshal(raw, &src); err != nil {
			return nil, badRequest("grammar", "grammar must be a string (GBNF)")
		}
		if strings.TrimSpace(src) != "" {
			if err := set("grammar", &turn.Format{Kind: turn.FormatGBNF, GBNF: src, Field: "grammar"}); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}
