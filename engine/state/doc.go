// Package state keeps sequence state across requests: the in-memory prefix
// cache of model snapshots that lets the engine restore the longest cached
// prefix of a new prompt and prefill only the rest.
//
// Keys are chained hashes of token pages of PageSize tokens (the hash of
// page i covers every token up to the end of page i). A snapshot is stored
// at a position (a page end, or a stable boundary the caller names) as the
// KV rows of its full pages, shared with every other snapshot whose prefix
// holds the same pages, plus its own copy of the rows after the last full
// page and of the recurrent (DeltaNet) state, which cannot be cut and so
// exists only at the snapshot's position. The cache is bounded in bytes and
// evicts the least recently used snapshot first; a page lives as long as a
// snapshot refers to it. Restoring copies into the sequence's own state, so
// eviction never pulls memory from under a running sequence.
//
// Persistence to disk (ARCHITECTURE.md, "Prefix cache and persistence") is
// not here yet.
package state
