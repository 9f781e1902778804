package turn

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/edgellmd/edgellmd/engine/grammar"
)

// A tool's parameters schema is shown to the model as the client wrote it,
// and its calls are held to it by a grammar. Agents' tools use keywords
// the grammar compiler does not enforce (Claude Code's propertyNames,
// formats such as "uri"): the call grammar then leaves out each keyword
// that it cannot compile, at the place it stands. Leaving a keyword out of
// a schema only widens what it accepts, so every call valid against the
// tool's schema still is against the grammar; the grammar just checks less
// there (docs/agents.md lists what is relaxed). A response_format schema is
// never relaxed: there the client asked for exactly that language.

// maxRelaxed bounds the keywords left out of one schema.
const maxRelaxed = 32

// toolSchemaGBNF compiles a tool's parameters schema into GBNF rules,
// leaving out the keywords the compiler refuses.
func toolSchemaGBNF(schema json.RawMessage, prefix string) (rules, root string, err error) {
	for range maxRelaxed {
		rules, root, err = grammar.SchemaToGBNF(schema, prefix)
		var se *grammar.SchemaError
		if err == nil || !errors.As(err, &se) || se.Keyword == "" || !strings.HasSuffix(se.Path, "/"+pointerToken(se.Keyword)) {
			return rules, root, err
		}
		relaxed, ok := dropAt(schema, strings.Split(strings.TrimPrefix(se.Path, "/"), "/"))
		if !ok {
			return rules, root, err
		}
		schema = relaxed
	}
	return rules, root, err
}

func pointerToken(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

func unpointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// dropAt returns doc without the member at the JSON pointer path (its
// tokens), keeping every other byte, so that objects keep their key order.
func dropAt(doc json.RawMessage, path []string) (json.RawMessage, bool) {
	doc = bytes.TrimSpace(doc)
	if len(path) == 0 || len(doc) == 0 {
		return nil, false
	}
	tok := unpointer(path[0])
	switch doc[0] {
	case '{':
		members, ok := objectMembers(doc)
		if !ok {
			return nil, false
		}
		var out bytes.Buffer
		out.WriteByte('{')
		found, first := false, true
		for _, m := range members {
			val := m.value
			if m.key == tok {
				found = true
				if len(path) == 1 {
					continue
				}
				if val, ok = dropAt(val, path[1:]); !ok {
					return nil, false
				}
			}
			if !first {
				out.WriteByte(',')
			}
			first = false
			k, _ := json.Marshal(m.key)
			out.Write(k)
			out.WriteByte(':')
			out.Write(val)
		}
		out.WriteByte('}')
		return out.Bytes(), found
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(doc, &items) != nil {
			return nil, false
		}
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(items) || len(path) == 1 {
			return nil, false
		}
		v, ok := dropAt(items[i], path[1:])
		if !ok {
			return nil, false
		}
		items[i] = v
		out, err := json.Marshal(items)
		return out, err == nil
	}
	return nil, false
}

type jsonMember struct {
	key   string
	value json.RawMessage
}

// objectMembers reads an object's members in order.
func objectMembers(doc json.RawMessage) ([]jsonMember, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []jsonMember
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, jsonMember{key, v})
	}
	return out, true
}

// lengthKeywords bound repetitions, which the grammar expands.
var lengthKeywords = []string{"maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties"}

// dropKeywords removes the members named in keys from every object of a
// schema that is a schema (not from "properties" maps, whose keys are
// property names), keeping the order of the rest.
func dropKeywords(doc json.RawMessage, keys []string) json.RawMessage {
	return dropKeywordsIn(doc, keys, false)
}

func dropKeywordsIn(doc json.RawMessage, keys []string, namesMap bool) json.RawMessage {
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 {
		return doc
	}
	switch doc[0] {
	case '{':
		members, ok := objectMembers(doc)
		if !ok {
			return doc
		}
		var out bytes.Buffer
		out.WriteByte('{')
		first := true
		for _, m := range members {
			if !namesMap && slices.Contains(keys, m.key) {
				continue
			}
			if !first {
				out.WriteByte(',')
			}
			first = false
			k, _ := json.Marshal(m.key)
			out.Write(k)
			out.WriteByte(':')
			sub := !namesMap && (m.key == "properties" || m.key == "$defs" || m.key == "definitions" || m.key == "patternProperties")
			out.Write(dropKeywordsIn(m.value, keys, sub))
		}
		out.WriteByte('}')
		return out.Bytes()
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(doc, &items) != nil {
			return doc
		}
		for i := range items {
			items[i] = dropKeywordsIn(items[i], keys, false)
		}
		out, err := json.Marshal(items)
		if err != nil {
			return doc
		}
		return out
	}
	return doc
}
