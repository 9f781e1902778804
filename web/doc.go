// Package web is edgellmd's HTTP face: an OpenAI-compatible API
// (/v1/models, /v1/chat/completions, /v1/completions, with server-sent
// events when streamed; also without the /v1 prefix, as llama-server
// answers), OpenAI's Responses API (/v1/responses: Codex, responses.go),
// Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens:
// Claude Code, anthropic.go) and llama.cpp server's extras (/health,
// /tokenize, /detokenize, /apply-template), on a gorilla/mux router. The
// routes are adapters over one turn pipeline (engine/turn): chat.go and
// completions.go (with request.go and format.go), anthropic.go and
// responses.go each map their JSON to a turn.Request, plan and run it
// (turn.go), and write the deltas and the turn.Result in their wire
// format; docs/agents.md says what each agent sends.
//
//	srv, err := web.New(web.Options{Scheduler: sched, ModelName: "qwen3.6-27b", Log: log})
//	httpServer := &http.Server{Addr: "127.0.0.1:8001", Handler: srv}
//
// A chat request flows: decode the JSON body into a turn.Request and
// validate it (turn.Request.Validate) → turn.Pipeline.Plan renders the
// model's chat template (engine/chat), tokenizes, and sets the prefix
// cache's publish points and the grammars → turn.Pipeline.Run submits it
// to engine.Scheduler.Submit, which runs it on the one engine worker
// behind a bounded queue, and turns each token's bytes into whole UTF-8
// characters, cuts them at stop strings and splits them into content,
// reasoning and tool-call deltas → SSE chunks (or one JSON response).
// The text work runs inside the engine's emit callback, so a stop string
// ends the generation at the token that completes it; writing to the
// client happens on the handler's goroutine, so a slow client never stalls
// the engine worker.
//
// Every request gets one zerolog line (request id, X-Session-ID, token
// counts, TTFT, TPOT, finish reason, status); errors use OpenAI's shape
// {"error":{"message","type","param","code"}}; panics become a 500 and a
// log line.
//
// The server also shows how the box is doing: GET / is the status page
// (static/, embedded in the binary, no CDN), which polls GET /status.json
// every 2 s and draws its own SVG charts; GET /metrics is Prometheus text
// from a registry of the server's own, with vLLM-style edgellmd_* names.
// Figures about the request are recorded where its log line is written;
// the power mode, telemetry and settings come from the daemon through a
// StatusSource.
//
// With an API key set, every route but /health needs it (auth.go): as a
// bearer token or an X-Api-Key header, or on the status page's routes also
// as ?key= or the cookie that sets; Options.Public opens the status page or
// /metrics. The API routes answer CORS preflights, and mark their answers
// for the browser origins in Options.CORSOrigins (cors.go). The key and
// the media type (a browser page of another origin must send
// application/json; other clients' bodies are read as JSON whatever they
// say) are checked from the headers before a body is read, a body must arrive within
// Options.BodyTimeout, and ConnLimit caps the connections a client holds
// (limits.go).
//
// What it is not for: loading models, config, signals and the listener's
// lifecycle (daemon), or anything inside the engine. It never imports
// daemon.
package web
