package web

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/chat"
	"github.com/edgellmd/edgellmd/engine/speculative"
	"github.com/edgellmd/edgellmd/engine/tokenizer"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// Options configure New.
type Options struct {
	// Scheduler runs the generations; required. Its engine gives the
	// tokenizer and the context length.
	Scheduler *engine.Scheduler
	// ModelName is the id served by /v1/models and accepted in "model".
	// Requests may also name ModelPath or one of ModelAliases, or leave
	// "model" empty; responses always name ModelName.
	ModelName string
	ModelPath string
	// ModelAliases are more ids accepted in "model" and listed by
	// /v1/models after ModelName (vLLM's further --served-model-name
	// values, llama-server's --alias), for clients configured with another
	// name. Empty ones are refused; repeats and ModelName itself are skipped.
	ModelAliases []string
	// SystemFingerprint is the system_fingerprint of every completion and
	// chunk: what, besides the seed, decides the output (the daemon derives
	// it from the model file, edgellmd's version and the engine). Empty
	// leaves the field out.
	SystemFingerprint string
	// Template renders chat prompts; nil means the model's own
	// (tokenizer.chat_template), or chat.ChatMLTemplate when it has none.
	Template *chat.Template
	// APIKey, when set, is the key every route but /health and the groups
	// in Public needs: as a bearer token or an X-Api-Key header, or on the
	// status page's routes also as ?key= or the cookie that sets (auth.go).
	APIKey string
	// CORSOrigins are the origins (scheme://host[:port], or "*" for any)
	// whose pages may call the API routes from a browser (cors.go). Empty:
	// none; preflights are answered 204 without allow headers.
	CORSOrigins []string
	// SpecialTokensInMessages lets control-token text inside message
	// content become control tokens, as Hugging Face's apply_chat_template
	// and llama.cpp do; by default it stays text (special.go).
	SpecialTokensInMessages bool
	// Public names route groups open without APIKey: PublicStatus (the
	// status page, its static files and /status.json), PublicMetrics.
	Public []string
	// MaxBodyBytes bounds request bodies (413 beyond); <= 0 means 8 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers: past it the request gets 408 and its connection is closed,
	// so that a client that never finishes its body holds nothing. <= 0
	// means DefaultBodyTimeout.
	BodyTimeout time.Duration
	// RequestTimeout bounds a generation request from arrival to its last
	// token, queueing included (504 when it runs out); <= 0 means none.
	RequestTimeout time.Duration
	Log            zerolog.Logger
	// Ready reports whether the server may take generations; until then
	// /health and the generation routes answer 503. nil means always.
	Ready func() bool
	// Status feeds the status page and /metrics with the power mode, the
	// machine's telemetry and the settings in force; nil shows none.
	Status StatusSource
	// Model describes the model file on the status page.
	Model ModelInfo
	// ResponsesStoreSize and ResponsesStoreTTL bound the Responses API's
	// stored responses (previous_response_id, GET /v1/responses/{id}),
	// kept in memory: the most recent ResponsesStoreSize, none older than
	// ResponsesStoreTTL; <= 0 means DefaultResponsesStoreSize and
	// DefaultResponsesStoreTTL.
	ResponsesStoreSize int
	ResponsesStoreTTL  time.Duration
	// ConnLimit, when the listeners have one, gives /metrics the count of
	// connections it refused (edgellmd_connections_refused_total).
	ConnLimit *ConnLimit
}

// DefaultMaxBodyBytes is the body limit when Options.MaxBodyBytes is unset.
const DefaultMaxBodyBytes = 8 << 20

// Server is the HTTP API over one model. It is an http.Handler.
type Server struct {
	opt     Options
	log     zerolog.Logger
	router  *mux.Router
	handler http.Handler
	source  turn.Source
	pipe    *turn.Pipeline // the turn pipeline every adapter maps its wire format to
	tok     *tokenizer.Tokenizer
	ctxLen  int
	tpl     *chat.Template
	created int64
	key     keyCheck
	cors    corsPolicy
	aliases []string // Options.ModelAliases without repeats
	started time.Time
	metrics *metrics
	// sessionKeys counts the distinct affinity keys seen (session.go).
	sessionKeys sessionKeySet
	book        statusBook // recent requests and errors for the status page
	live        liveBook   // the generations in flight
	// tokenizing bounds the prompts tokenized at once, outside the
	// engine's queue, to what the engine admits (its sequences and its
	// queue): a slow prompt waits its turn like a generation, or is
	// refused like one.
	tokenizing chan struct{}
	stored     *responseStore // the Responses API's stored responses
}

// New builds the server and its routes.
func New(opt Options) (*Server, error) {
	if opt.Scheduler == nil {
		return nil, errors.New("web: Options.Scheduler is nil")
	}
	e := opt.Scheduler.Engine()
	srv, err := newServer(opt, e.Tokenizer(), e.ContextLen(), opt.Scheduler.Submit)
	if err != nil {
		return nil, err
	}
	// As many prompts may be tokenized at once as the engine admits: its
	// sequences and its queue.
	srv.tokenizing = make(chan struct{}, opt.Scheduler.Depth()+e.MaxSequences())
	if err := srv.newPipeline(); err != nil {
		return nil, err
	}
	return srv, nil
}

// newServer builds a server over any token source (tests script one).
func newServer(opt Options, tok *tokenizer.Tokenizer, ctxLen int, src turn.Source) (*Server, error) {
	if opt.ModelName == "" {
		return nil, errors.New("web: Options.ModelName is empty")
	}
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opt.BodyTimeout <= 0 {
		opt.BodyTimeout = DefaultBodyTimeout
	}
	if err := checkPublic(opt.Public); err != nil {
		return nil, err
	}
	cors, err := newCORSPolicy(opt.CORSOrigins)
	if err != nil {
		return nil, err
	}
	aliases, err := modelAliases(opt.ModelName, opt.ModelAliases)
	if err != nil {
		return nil, err
	}
	s := &Server{opt: opt, log: opt.Log, source: src, tok: tok, ctxLen: ctxLen, tpl: opt.Template, created: time.Now().Unix(), started: time.Now(),
		cors: cors, aliases: aliases, stored: newResponseStore(opt.ResponsesStoreSize, opt.ResponsesStoreTTL)}
	s.book.since = s.started
	if s.tpl == nil {
		v := tok.Vocab()
		bos, eos := "", ""
		if v.BOS >= 0 && int(v.BOS) < len(v.Tokens) {
			bos = v.Tokens[v.BOS]
		}
		if v.EOS >= 0 && int(v.EOS) < len(v.Tokens) {
			eos = v.Tokens[v.EOS]
		}
		tpl, err := chat.NewTemplate(v.ChatTemplate, bos, eos)
		if err != nil {
			return nil, fmt.Errorf("web: the model's chat template: %w", err)
		}
		s.tpl = tpl
	}
	if err := s.newPipeline(); err != nil {
		return nil, err
	}
	s.key = newKeyCheck(opt.APIKey)
	s.routes()
	s.metrics = newMetrics(s)
	s.statusRoutes()
	s.handler = s.limitBodyTime(s.logRequests(s.recoverPanics(s.router)))
	return s, nil
}

// newPipeline builds the turn pipeline over the server's tokenizer,
// template and source.
func (s *Server) newPipeline() error {
	pipe, err := turn.New(turn.Options{Tokenizer: s.tok, Template: s.tpl, ContextLen: s.ctxLen, Source: s.source,
		SpecialTokensInMessages: s.opt.SpecialTokensInMessages, Tokenizing: s.tokenizing, Log: s.log})
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	s.pipe = pipe
	return nil
}

func (s *Server) routes() {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, req, &apiError{Status: http.StatusNotFound, Type: "not_found_error", Message: "no route for " + req.URL.Path})
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, req, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
			Message: fmt.Sprintf("method %s is not allowed on %s", req.Method, req.URL.Path)})
	})
	// An API route answers browsers' CORS preflights (OPTIONS, without
	// the key: browsers never send it there) and marks its answers for the
	// origins allowed (cors.go).
	api := func(path string, h http.Handler, methods ...string) {
		r.Handle(path, s.cors.actual(h)).Methods(methods...)
		r.Handle(path, s.cors.preflight(methods)).Methods(http.MethodOptions)
	}
	api("/health", http.HandlerFunc(s.health), http.MethodGet, http.MethodHead)
	// The key and the media type are checked from the headers, before
	// anything reads the body.
	get := func(path string, h http.HandlerFunc) {
		api(path, s.requireKey(h), http.MethodGet)
	}
	post := func(path string, h http.HandlerFunc) {
		api(path, s.requireKey(s.requireJSON(h)), http.MethodPost)
	}
	// The OpenAI routes answer with and without /v1, as llama-server's do
	// (clients given a base URL without /v1 call /chat/completions).
	for _, prefix := range []string{"/v1", ""} {
		get(prefix+"/models", s.listModels)
		get(prefix+"/models/{model}", s.getModel)
		post(prefix+"/chat/completions", s.ready(s.chatCompletions))
		post(prefix+"/completions", s.ready(s.completions))
	}
	// Anthropic's Messages API (Claude Code) answers every error in its own
	// shape, the key's and the media type's included.
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		h := s.messages
		if strings.HasSuffix(path, "count_tokens") {
			h = s.countTokens
		}
		r.Handle(path, s.cors.actual(anthropicRoute(s.requireKey(s.requireJSON(s.ready(h)))))).Methods(http.MethodPost)
		r.Handle(path, s.cors.preflight([]string{http.MethodPost})).Methods(http.MethodOptions)
	}
	post("/v1/responses", s.ready(s.createResponse))
	get("/v1/responses/{id}", s.getResponse)
	api("/v1/responses/{id}", s.requireKey(http.HandlerFunc(s.deleteResponse)), http.MethodDelete)
	post("/tokenize", s.tokenize)
	post("/detokenize", s.detokenize)
	post("/apply-template", s.applyTemplate)
	s.router = r
}

// quietRequest says which requests are logged at debug level: reads
// outside the model routes (health checks, scrapes, the status page's
// polling) and CORS preflights (the request that follows is logged).
func quietRequest(r *http.Request) bool {
	switch r.Method {
	case http.MethodOptions:
		return true
	case http.MethodGet:
	default:
		return false
	}
	p := r.URL.Path
	return !strings.HasPrefix(p, "/v1/") && p != "/models" && !strings.HasPrefix(p, "/models/")
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Router is the server's router, for mounting more routes (admin): they
// get the request log line, panic recovery and the body read deadline,
// not the API key check.
func (s *Server) Router() *mux.Router { return s.router }

func (s *Server) isReady() bool { return s.opt.Ready == nil || s.opt.Ready() }

func (s *Server) ready(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.isReady() {
			writeError(w, r, notReady())
			return
		}
		h(w, r)
	}
}

func notReady() *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Code: "not_ready",
		Message: "the server is not ready: the model is loading or the server is stopping", retryAfterSeconds: 1}
}

// readBody reads the request body within the size limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.opt.MaxBodyBytes {
		return nil, &http.MaxBytesError{Limit: s.opt.MaxBodyBytes}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		var ae *apiError // the body read deadline's 408
		if errors.As(err, &mbe) || errors.As(err, &ae) {
			return nil, err
		}
		return nil, badRequest("", "reading the request body: %v", err)
	}
	return body, nil
}

// --- per-request record and log line ---

// record is what a handler tells the request's log line.
type record struct {
	id           string // the request id (X-Request-ID)
	start        time.Time
	model        string
	stream       bool
	promptTokens int
	cachedTokens int
	outputTokens int
	// speculative decoding (genOutcome's)
	draft       string
	spec        speculative.Stats
	ttft        time.Duration
	tpot        time.Duration
	finish      string
	ignored     []string
	err         string
	generation  bool   // a generation route: the token fields are logged
	wire        uint8  // the API's error shape: wireOpenAI or wireAnthropic
	promptParam string // the field holding its prompt: messages or prompt
	sessionKey  string // the affinity key answered (session.go)
}

type recordKey struct{}

func recordOf(ctx context.Context) *record {
	rec, _ := ctx.Value(recordKey{}).(*record)
	return rec
}

// statusWriter remembers the status and whether anything was written. It
// unwraps for http.ResponseController (flushing SSE).
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestIDHeader is echoed when the client sends a usable one.
const requestIDHeader = "X-Request-ID"

func requestID(r *http.Request) string {
	id := r.Header.Get(requestIDHeader)
	if id == "" || len(id) > 128 {
		return rand.Text()
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return rand.Text()
		}
	}
	return id
}

// logRequests writes one JSON line per request.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := requestID(r)
		w.Header().Set(requestIDHeader, id)
		rec := &record{start: start, id: id}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), recordKey{}, rec)))

		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := time.Since(start)
		s.metrics.observe(rec, status, elapsed)
		s.book.observe(time.Now(), id, r.Method, r.URL.Path, rec, status, elapsed)
		level := zerolog.InfoLevel
		if quietRequest(r) {
			level = zerolog.DebugLevel
		}
		if status >= 500 && status != http.StatusServiceUnavailable && status != http.StatusGatewayTimeout {
			level = zerolog.ErrorLevel
		}
		ev := s.log.WithLevel(level).Str("request_id", id).Str("method", r.Method).Str("path", r.URL.Path).
			Int("status", status).Dur("duration_ms", time.Since(start)).Str("remote", r.RemoteAddr)
		if sid := r.Header.Get("X-Session-ID"); sid != "" {
			ev = ev.Str("session_id", sid)
		}
		if rec.generation {
			ev = ev.Str("model", rec.model).Bool("stream", rec.stream).
				Int("prompt_tokens", rec.promptTokens).Int("cached_prompt_tokens", rec.cachedTokens).
				Int("output_tokens", rec.outputTokens).Str("finish_reason", rec.finish).
				Float64("ttft_ms", msec(rec.ttft)).Float64("tpot_ms", msec(rec.tpot))
			if rec.draft != "" {
				ev = ev.Str("draft", rec.draft).Int64("target_steps", rec.spec.TargetSteps).
					Int64("draft_tokens", rec.spec.Drafted).Int64("accepted_tokens", rec.spec.Accepted)
			}
		}
		if len(rec.ignored) > 0 {
			ev = ev.Strs("ignored_fields", rec.ignored)
		}
		if rec.err != "" {
			ev = ev.Str("error", rec.err)
		}
		ev.Msg("request")
	})
}

func msec(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// recoverPanics turns a handler's panic into a 500 and a log line. A
// panic after a streamed response began can only end the stream.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error().Str("method", r.Method).Str("path", r.URL.Path).Str("panic", fmt.Sprint(v)).
				Str("stack", string(debug.Stack())).Msg("handler panic")
			if sw.status == 0 {
				writeJSON(sw, http.StatusInternalServerError, (&apiError{Type: "server_error", Message: "internal error"}).body())
			}
		}()
		next.ServeHTTP(sw, r)
	})
}
