package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/gorilla/mux"
)

// health answers 200 {"status":"ok"} once the server may take
// generations, 503 with the reason before.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !s.isReady() {
		ae := notReady()
		w.Header().Set("Retry-After", "1")
		writeJSON(w, ae.Status, struct {
			Status string      `json:"status"`
			Error  errorObject `json:"error"`
		}{"unavailable", ae.body().Error})
		return
	}
	if err := s.engineBroken(); err != nil {
		// A forward pass panicked: the model cannot be trusted to run
		// (engine.ErrBroken), and only a restart clears it.
		code := "engine_broken"
		writeJSON(w, http.StatusServiceUnavailable, struct {
			Status string      `json:"status"`
			Error  errorObject `json:"error"`
		}{"error", errorObject{Message: err.Error(), Type: "server_error", Code: &code}})
		return
	}
	body := struct {
		Status  string `json:"status"`
		Running *int   `json:"requests_running,omitempty"`
		Waiting *int   `json:"requests_waiting,omitempty"`
	}{Status: "ok"}
	if sch := s.opt.Scheduler; sch != nil {
		running, waiting := sch.Running(), sch.Waiting()
		body.Running, body.Waiting = &running, &waiting
	}
	writeJSON(w, http.StatusOK, body)
}

// engineBroken is the engine's failure (engine.Engine.Broken), nil while
// it works.
func (s *Server) engineBroken() error {
	if s.opt.Scheduler == nil {
		return nil
	}
	return s.opt.Scheduler.Engine().Broken()
}

type modelObject struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"` // vLLM's extension: the context length
	// Quantization is the file's preset ("Q4_K_M"; Ollama's
	// quantization_level), ModelInfo.Quantization.
	Quantization string `json:"quantization,omitempty"`
}

func (s *Server) model(id string) modelObject {
	return modelObject{ID: id, Object: "model", Created: s.created, OwnedBy: "edgellmd", MaxModelLen: s.ctxLen, Quantization: s.opt.Model.Quantization}
}

// listModels lists the served name, then each alias as a model of its own,
// as vLLM lists every --served-model-name: a client that picks from the
// list finds the name it was configured with.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	data := []modelObject{s.model(s.opt.ModelName)}
	for _, a := range s.aliases {
		data = append(data, s.model(a))
	}
	writeJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", data})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["model"]
	if name != s.opt.ModelName && !slices.Contains(s.aliases, name) {
		writeError(w, r, modelNotFound(name))
		return
	}
	writeJSON(w, http.StatusOK, s.model(name))
}

// modelAliases checks Options.ModelAliases and drops repeats and the
// served name itself.
func modelAliases(name string, aliases []string) ([]string, error) {
	var out []string
	for i, a := range aliases {
		if a == "" {
			return nil, fmt.Errorf("web: Options.ModelAliases[%d] is empty", i)
		}
		if a != name && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// decodeBody reads a small JSON request into v.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := s.readBody(w, r)
	if err == nil {
		if _, err = decodeObject(body); err == nil {
			if e := json.Unmarshal(body, v); e != nil {
				err = jsonError("", e)
			}
		}
	}
	if err != nil {
		writeError(w, r, err)
		return false
	}
	return true
}

// tokenize is llama.cpp server's POST /tokenize: {"content", "add_special"
// (false), "parse_special" (true), "with_pieces" (false)} → {"tokens"}.
// With pieces, each token is {"id", "piece"}: the piece as a string when
// it is valid UTF-8, else as its bytes.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	req := struct {
		Content      *string `json:"content"`
		AddSpecial   bool    `json:"add_special"`
		ParseSpecial *bool   `json:"parse_special"`
		WithPieces   bool    `json:"with_pieces"`
	}{}
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.Content == nil {
		writeError(w, r, badRequest("content", "content: missing"))
		return
	}
	parse := req.ParseSpecial == nil || *req.ParseSpecial
	ids := s.tok.Encode(*req.Content, req.AddSpecial, parse)
	if !req.WithPieces {
		writeJSON(w, http.StatusOK, struct {
			Tokens []int32 `json:"tokens"`
		}{ids})
		return
	}
	type piece struct {
		ID    int32 `json:"id"`
		Piece any   `json:"piece"`
	}
	pieces := make([]piece, len(ids))
	for i, id := range ids {
		b := s.tok.Piece(id)
		if utf8.Valid(b) {
			pieces[i] = piece{id, string(b)}
		} else {
			ints := make([]int, len(b))
			for j, c := range b {
				ints[j] = int(c)
			}
			pieces[i] = piece{id, ints}
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Tokens []piece `json:"tokens"`
	}{pieces})
}

// detokenize is llama.cpp server's POST /detokenize: {"tokens"} → {"content"}.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	req := struct {
		Tokens []int32 `json:"tokens"`
	}{}
	if !s.decodeBody(w, r, &req) {
		return
	}
	n := len(s.tok.Vocab().Tokens)
	for i, id := range req.Tokens {
		if id < 0 || int(id) >= n {
			writeError(w, r, badRequest("tokens", "tokens[%d]: %d is outside the vocabulary of %d tokens", i, id, n))
			return
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Content string `json:"content"`
	}{s.tok.Decode(req.Tokens)})
}

// applyTemplate is llama.cpp server's POST /apply-template: a chat
// completion body in, {"prompt": the rendered prompt text} out.
func (s *Server) applyTemplate(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	fields, err := decodeObject(body)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if _, ok := fields["messages"]; !ok {
		writeError(w, r, badRequest("messages", "messages: missing"))
		return
	}
	var p chatParams
	if err := decodeChatFields(body, fields, &p); err != nil {
		writeError(w, r, err)
		return
	}
	prompt, err := s.tpl.Render(p.Chat)
	if err != nil {
		writeError(w, r, badRequest("messages", "%v", err))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Prompt string `json:"prompt"`
	}{prompt})
}
