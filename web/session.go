package web

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strings"
	"sync"
)

// The affinity key: every generation response carries X-Session-Key, the
// same for each turn of one conversation, so a proxy in front of several
// boxes (packaging/fleet/nginx.conf) can send a conversation's turns to
// the box whose prefix cache holds it. The key is taken from the first of
// these that the request carries, the order the proxy's map uses too:
//
//  1. the X-Session-Key header (any client; one without the others sends
//     back the key its first answer carried)
//  2. X-Claude-Code-Session-Id (Claude Code)
//  3. session-id (Codex)
//  4. x-session-id (OpenCode; edgellmd bench agentic)
//  5. the body's prompt_cache_key (Responses API; chat where sent)
//  6. the body's metadata.user_id (Anthropic Messages)
//  7. a Responses turn with previous_response_id: the key of the stored
//     response it follows
//  8. otherwise "h-" and a hash of what stays fixed across the turns: the
//     system prompt, the tool names and the first user message (for
//     /v1/completions, the prompt's first kilobyte).
const sessionKeyHeader = "X-Session-Key"

var sessionKeyHeaders = []string{sessionKeyHeader, "X-Claude-Code-Session-Id", "Session-Id", "X-Session-Id"}

// maxSessionKeyBytes bounds a key passed through as it came; a longer one,
// or one with bytes a header cannot carry, is hashed.
const maxSessionKeyBytes = 256

// sessionBody is the part of a request body the key may come from; the
// three APIs' fields side by side, each absent from the others.
type sessionBody struct {
	PromptCacheKey string          `json:"prompt_cache_key"`
	Metadata       json.RawMessage `json:"metadata"`
	System         json.RawMessage `json:"system"`       // Anthropic: a string or text blocks
	Instructions   json.RawMessage `json:"instructions"` // Responses
	Tools          []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Messages []sessionMessage `json:"messages"` // chat and Anthropic
	Input    json.RawMessage  `json:"input"`    // Responses: a string or items
	Prompt   json.RawMessage  `json:"prompt"`   // completions
}

type sessionMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// sessionKey returns the request's affinity key and where it came from
// (a header's name, a body field's, or "hash").
func sessionKey(h http.Header, body []byte) (key, source string) {
	for _, name := range sessionKeyHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return passKey(v), name
		}
	}
	var b sessionBody
	// A body that does not decode still gets a key; the handler reports
	// the error. Fields that decoded before a type mismatch are kept.
	_ = json.Unmarshal(body, &b)
	if v := strings.TrimSpace(b.PromptCacheKey); v != "" {
		return passKey(v), "prompt_cache_key"
	}
	var meta struct {
		UserID string `json:"user_id"`
	}
	if json.Unmarshal(b.Metadata, &meta) == nil && strings.TrimSpace(meta.UserID) != "" {
		return passKey(strings.TrimSpace(meta.UserID)), "metadata.user_id"
	}
	sum := sha256.New()
	part := func(s string) {
		sum.Write([]byte(s))
		sum.Write([]byte{0})
	}
	part(blockText(b.System))
	part(blockText(b.Instructions))
	for _, t := range b.Tools {
		part(t.Name + t.Function.Name)
	}
	firstUser := func(msgs []sessionMessage) string {
		var sys strings.Builder
		for _, m := range msgs {
			switch m.Role {
			case "system", "developer":
				sys.WriteString(blockText(m.Content))
			case "user":
				return sys.String() + "\x00" + blockText(m.Content)
			}
		}
		return sys.String()
	}
	part(firstUser(b.Messages))
	var input string
	if json.Unmarshal(b.Input, &input) == nil {
		part(input)
	} else {
		var items []sessionMessage
		_ = json.Unmarshal(b.Input, &items)
		part(firstUser(items))
	}
	var prompt string
	if json.Unmarshal(b.Prompt, &prompt) == nil {
		part(prompt[:min(len(prompt), 1024)])
	}
	return "h-" + hex.EncodeToString(sum.Sum(nil)[:12]), "hash"
}

// blockText is the text of a content field: a string, or the text of its
// blocks ({"type":"text","text":...}, input_text too) joined. Markers that
// move between turns (Anthropic's cache_control) are left out.
func blockText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var out strings.Builder
	for _, bl := range blocks {
		out.WriteString(bl.Text)
	}
	return out.String()
}

// passKey is v when a header can carry it as it is, else its hash.
func passKey(v string) string {
	ok := len(v) <= maxSessionKeyBytes
	for i := 0; ok && i < len(v); i++ {
		ok = v[i] >= 0x20 && v[i] < 0x7f
	}
	if ok {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:12])
}

// tagSession sets the response's X-Session-Key, logs it at debug level and
// counts it among the keys seen.
func (s *Server) tagSession(w http.ResponseWriter, r *http.Request, body []byte) {
	key, source := sessionKey(r.Header, body)
	if source == "hash" {
		// A Responses turn chained with previous_response_id carries only
		// its new items: it keeps the key of the response it follows.
		var chained struct {
			PreviousResponseID string `json:"previous_response_id"`
		}
		if json.Unmarshal(body, &chained) == nil && chained.PreviousResponseID != "" && s.stored != nil {
			if prev, ok := s.stored.get(chained.PreviousResponseID); ok && prev.sessionKey != "" {
				key, source = prev.sessionKey, "previous_response_id"
			}
		}
	}
	w.Header().Set(sessionKeyHeader, key)
	if rec := recordOf(r.Context()); rec != nil {
		rec.sessionKey = key
		s.log.Debug().Str("request_id", rec.id).Str("session_key", key).Str("session_key_source", source).Msg("session key")
	}
	s.sessionKeys.add(key)
}

// maxSessionKeysTracked caps the set behind edgellmd_session_keys_total:
// keys are held as 64-bit hashes (about 40 bytes each in the map), so the
// set stays under ~3 MB; when it is full it is emptied, and a key seen
// again after that counts again.
const maxSessionKeysTracked = 1 << 16

// sessionKeySet counts distinct keys in bounded memory.
type sessionKeySet struct {
	mu       sync.Mutex
	seen     map[uint64]struct{}
	distinct uint64
}

func (k *sessionKeySet) add(key string) {
	h := fnv.New64a()
	h.Write([]byte(key))
	sum := h.Sum64()
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.seen[sum]; ok {
		return
	}
	if k.seen == nil || len(k.seen) >= maxSessionKeysTracked {
		k.seen = make(map[uint64]struct{})
	}
	k.seen[sum] = struct{}{}
	k.distinct++
}

func (k *sessionKeySet) count() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.distinct
}
