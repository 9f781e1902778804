// Package bench replays agent workloads against an OpenAI-compatible server
// and measures them the way MLCommons' endpoints harness does for the MLPerf
// Inference Edge Agentic benchmark.
//
// The workload is a trace of recorded agent trajectories, one JSON row per
// message (LoadTrace). Each user or tool row becomes one streamed chat
// completion request carrying the system prompt, the whole recorded history
// and that row: the replay is teacher-forced, the model's own answers are
// never fed back. Run issues the requests one conversation after another
// (or several conversations at once), times every SSE stream (TTFT at the
// first delta that carries output, TPOT over the rest), counts tokens on the
// client side through the model's own chat template and tokenizer
// (TokenCounter), reads the server's usage and prefix-cache figures, computes
// the ideal prefix-cache hit of the trace, and scores each answer's bash tool
// calls against the recorded ones (BashActions, IoU). WriteReport writes the
// per-turn records, a summary, a text report and plots.
//
// The accuracy side is RunBFCL: single-turn function-calling prompts in the
// BFCL format, scored by an AST match when the file carries answers.
//
// What it is not for: serving (web), rendering policy (engine/chat is used as
// is), or any terminal user interface (cmd/edgellmd draws the progress bar
// from Config.Progress).
package bench
