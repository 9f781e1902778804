package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"sort"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/daemon"
	"github.com/edgellmd/edgellmd/engine/state"
)

// cmdCache: `edgellmd cache stats|clear [-c CONFIG] [--dir DIR] [--json]`,
// on the prefix cache's directory as its files are (no model needed).
func cmdCache(args []string, stdout io.Writer, log zerolog.Logger) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: cache needs stats or clear", errUsage)
	}
	if isHelp(args[0]) {
		return groupHelp(stdout, "cache")
	}
	sub := args[0]
	if sub != "stats" && sub != "clear" {
		return fmt.Errorf("%w: unknown cache command %q (want stats or clear)", errUsage, sub)
	}
	fs := newFlagSet("cache " + sub)
	cfgPath := fs.String("c", daemon.DefaultConfigPath, "config file whose cache.dir is the directory (absent file: the default "+daemon.DefaultConfig().Cache.Dir+")")
	dir := fs.String("dir", "", "cache directory (overrides cache.dir)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["dir"] {
		cfg, err := daemon.LoadConfig(*cfgPath)
		switch {
		case errors.Is(err, iofs.ErrNotExist) && !set["c"]:
			*dir = daemon.DefaultConfig().Cache.Dir
		case err != nil:
			return err
		default:
			*dir = cfg.Cache.Dir
		}
	}
	if *dir == "" {
		return fmt.Errorf("cache: no directory (cache.dir is empty; give --dir)")
	}
	if sub == "clear" {
		return cacheClear(*dir, *asJSON, stdout, log)
	}
	return cacheStats(*dir, *asJSON, stdout)
}

func cacheClear(dir string, asJSON bool, stdout io.Writer, log zerolog.Logger) error {
	if _, err := os.Stat(dir); errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("cache clear: %s does not exist", dir)
	}
	files, bytes, err := state.ClearDir(dir)
	if errors.Is(err, state.ErrLocked) {
		return fmt.Errorf("refusing to clear %s while a daemon uses it (stop it first, e.g. systemctl stop edgellmd): %w", dir, err)
	}
	if err != nil {
		return err
	}
	log.Info().Str("dir", dir).Int("files", files).Int64("bytes", bytes).Msg("prefix cache cleared")
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"dir": dir, "files": files, "bytes": bytes})
	}
	fmt.Fprintf(stdout, "removed %d segment files (%s) from %s\n", files, cacheBytes(bytes), dir)
	return nil
}

// fingerprintSum is what a directory holds for one fingerprint.
type fingerprintSum struct {
	Fingerprint string `json:"fingerprint"`
	Segments    int    `json:"segments"`
	Bytes       int64  `json:"bytes"`
	Snapshots   int    `json:"snapshots"`
	Pages       int    `json:"pages"`
	Tokens      int64  `json:"tokens"`
	Damaged     int    `json:"damaged"`
}

func cacheStats(dir string, asJSON bool, stdout io.Writer) error {
	info, err := state.InspectDir(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		if asJSON {
			return json.NewEncoder(stdout).Encode(info)
		}
		fmt.Fprintf(stdout, "%s: no cache yet\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	by := map[string]*fingerprintSum{}
	var unreadable []state.SegmentInfo
	for _, s := range info.Segments {
		if s.Fingerprint == "" && s.Error != "" {
			unreadable = append(unreadable, s)
			continue
		}
		f := by[s.Fingerprint]
		if f == nil {
			f = &fingerprintSum{Fingerprint: s.Fingerprint}
			by[s.Fingerprint] = f
		}
		f.Segments++
		f.Bytes += s.Bytes
		f.Snapshots += s.Snapshots
		f.Pages += s.Pages
		f.Tokens += s.Tokens
		f.Damaged += s.Damaged
	}
	sums := make([]fingerprintSum, 0, len(by))
	for _, f := range by {
		sums = append(sums, *f)
	}
	sort.Slice(sums, func(i, j int) bool { return sums[i].Bytes > sums[j].Bytes })
	if asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			state.DirInfo
			Fingerprints []fingerprintSum `json:"fingerprints"`
		}{info, sums})
	}
	use := ""
	if info.InUse {
		use = " (in use by a running daemon)"
	}
	fmt.Fprintf(stdout, "cache dir: %s%s\n", dir, use)
	fmt.Fprintf(stdout, "%d segment files, %s\n", len(info.Segments), cacheBytes(info.Bytes))
	for _, f := range sums {
		fmt.Fprintf(stdout, "fingerprint %q: %d snapshot records (%d tokens), %d page records, %s in %d segments",
			f.Fingerprint, f.Snapshots, f.Tokens, f.Pages, cacheBytes(f.Bytes), f.Segments)
		if f.Damaged > 0 {
			fmt.Fprintf(stdout, ", %d damaged records", f.Damaged)
		}
		fmt.Fprintln(stdout)
	}
	for _, s := range unreadable {
		fmt.Fprintf(stdout, "unreadable: %s (%s): %s\n", s.Name, cacheBytes(s.Bytes), s.Error)
	}
	return nil
}

// cacheBytes writes a byte count for people: 1.5 MiB.
func cacheBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
