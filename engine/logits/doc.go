// Package logits shapes a logits row before a token is picked and reads
// log-probabilities from it: a request's grammar constraint (whole or lazy,
// after a trigger such as a tool call's opening), its penalties and logit
// bias (Shaper, which the speculative decoder clones per draft branch), and
// the log-probabilities of the token picked and its top alternatives. The
// vocabulary shaping needs (the grammar's view of the tokens, the triggers'
// token indexes) is a model's Vocab, built once and shared by its requests.
//
// It does not pick tokens (engine/sample), compile grammars
// (engine/grammar) or decide what a request is constrained to (the turn's
// constrain stage).
package logits
