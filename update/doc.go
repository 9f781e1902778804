// Package update installs signed model bundles: it verifies a bundle while
// streaming it (an ed25519 signature over the manifest, then each file's size
// and SHA-256), stages it under STATE/bundles/<version>/, swaps the
// STATE/current symlink atomically, runs a health check the caller supplies,
// and commits — or switches current back. A state file records an uncommitted
// trial so that a crash or power loss at any step is undone by Recover before
// the daemon loads its model.
//
// A bundle is a tar whose first entry is manifest.json, whose second is
// manifest.sig (the 64-byte ed25519 signature of manifest.json's exact bytes),
// followed by the files the manifest lists, each exactly once and as a
// regular file (folder entries for their parents are allowed; links, devices
// and anything else are refused). Nothing in a bundle is trusted before the
// signature checks out against a trusted key, and no file is kept before its
// size and hash do.
//
// The state directory (/var/lib/edgellmd on a device):
//
//	update.json          committed current and previous versions, a trial in progress, history, last failure
//	current              symlink to bundles/<version>, swapped by rename
//	bundles/<version>/   the bundle's files, its manifest.json and manifest.sig
//	bundles/.staging-*   a bundle being received (removed by Recover after a crash)
//	.update.lock         flock: one apply, rollback or recover at a time, across processes
//
// Apply's steps, each fsynced before the next: verify signature → check
// compatibility, version, disk space → stream files into staging, checking
// each → rename staging to bundles/<version> → write the trial into
// update.json → swap current → health check → write the commit into
// update.json (or swap current back and record the failure) → prune to the
// last N bundles, never current or previous. Recover at start rolls back a
// recorded trial and puts current back on the committed version.
//
// The package knows nothing of HTTP or of the daemon: the daemon calls
// Recover at start and Apply for POST /admin/update (package web);
// cmd/edgellmd's `update` command calls the same functions.
package update
