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
// With a directory (Open with Options.Dir) the cache persists: every
// published snapshot goes to a writer goroutine (a bounded queue; Publish
// never waits for the disk) that appends its new pages and then the
// snapshot to append-only segment files, each record with a CRC-32C, each
// segment headed by the caller's fingerprint (model file, KV type) and the
// format version (segment.go spells the format out). The files are a
// second tier: a Lookup that finds a longer prefix on disk than in memory
// reads it back (and keeps it in memory). At Open the files are scanned in
// the background and their snapshots become visible as each segment is
// read; a damaged record, a truncated tail or a segment of another
// fingerprint is skipped with a log line and never used. A write that fails
// (a full disk) is cut back off its segment, or the segment it was starting
// is deleted, so the files hold only whole records; the publish is counted
// as a dropped write and Stats says persistence is failing until a write
// succeeds again. Segment files holding no record (an older build left them
// on a full disk) are deleted after the scan. The disk budget is
// kept by deleting whole segments, other fingerprints' first and then the
// oldest, after copying forward the pages newer snapshots still need;
// snapshots that lookups keep using are rewritten before their segment
// goes. A LOCK file (flock) keeps two processes from using one directory,
// and a process killed at any moment loses only the records it had not
// written yet. InspectDir and ClearDir serve `edgellmd cache`.
package state
