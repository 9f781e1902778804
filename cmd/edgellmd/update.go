package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/power"
	"github.com/edgellmd/edgellmd/update"
)

// Defaults of the update command on a device.
const (
	defaultStateDir   = "/var/lib/edgellmd"
	defaultTrustedDir = "/etc/edgellmd/trusted.d"
	// defaultCheckPrompt is the health-check prompt of `pack --model-check`
	// when --expect-prompt is not given.
	defaultCheckPrompt = "Once upon a time"
)

const updateUsage = `edgellmd update: signed model bundles.

  edgellmd update keygen -o KEYBASE                  writes KEYBASE.key (private, 0600) and KEYBASE.pub
  edgellmd update pack --key KEY --version V [--name N] [--model FILE]
                       [--expect-prompt P --expect-tokens 1,2,3 | --model-check [--expect-prompt P] [--expect-n 16]]
                       [--arch arm64,amd64] [--min-version V] [--device-family Orin,Thor] DIR -o BUNDLE
  edgellmd update apply BUNDLE|- [--pubkey KEY.pub]... [--trusted-dir /etc/edgellmd/trusted.d] [--allow-downgrade]
                       [--keep 3] [--state-dir /var/lib/edgellmd] [--json]
  edgellmd update status [--state-dir DIR] [--json]
  edgellmd update rollback [--state-dir DIR] [--json]
`

func cmdUpdate(args []string, stdout io.Writer, log zerolog.Logger) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: update needs keygen, pack, apply, status or rollback\n\n%s", errUsage, updateUsage)
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "keygen":
		return updateKeygen(rest, stdout)
	case "pack":
		return updatePack(rest, stdout, log)
	case "apply":
		return updateApply(rest, stdout, log)
	case "status":
		return updateStatus(rest, stdout)
	case "rollback":
		return updateRollback(rest, stdout, log)
	}
	if isHelp(sub) {
		fmt.Fprint(stdout, updateUsage)
		return nil
	}
	return fmt.Errorf("%w: unknown update command %q (want keygen, pack, apply, status or rollback)", errUsage, sub)
}

func updateKeygen(args []string, stdout io.Writer) error {
	fs := newFlagSet("update keygen")
	out := fs.String("o", "", "base path of the key files: BASE.key and BASE.pub are written (never overwritten)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if *out == "" {
		return fmt.Errorf("%w: -o KEYBASE is required", errUsage)
	}
	pub, err := update.GenerateKeyFiles(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key %s: private %s.key (keep it secret), public %s.pub (copy it to %s/ on the devices)\n",
		update.KeyID(pub), *out, *out, defaultTrustedDir)
	return nil
}

func updatePack(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("update pack")
	keyPath := fs.String("key", "", "private key that signs the bundle (from update keygen)")
	version := fs.String("version", "", "bundle version, SemVer (e.g. 1.2.0)")
	name := fs.String("name", "", "bundle name (default: the folder's name)")
	model := fs.String("model", "", "model file inside DIR (default: the only .gguf there)")
	prompt := fs.String("expect-prompt", "", "health-check prompt")
	tokens := fs.String("expect-tokens", "", "the health check's expected greedy token ids, comma-separated")
	modelCheck := fs.Bool("model-check", false, "compute the expected tokens by loading the model and decoding the prompt greedily")
	n := fs.Int("expect-n", 16, "tokens to record with --model-check")
	threads := fs.Int("threads", 0, "kernel worker threads for --model-check (0 = all cores)")
	arch := fs.String("arch", "", "comma-separated GOARCH values the bundle is for (default: any)")
	minVersion := fs.String("min-version", "", "oldest edgellmd version that may install the bundle")
	family := fs.String("device-family", "", "comma-separated Jetson families the bundle is for, e.g. Orin,Thor (default: any)")
	out := fs.String("o", "", "bundle file to write")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return fmt.Errorf("%w: want one folder DIR to pack, got %d arguments", errUsage, len(pos))
	case *keyPath == "" || *version == "" || *out == "":
		return fmt.Errorf("%w: --key, --version and -o are required", errUsage)
	case *modelCheck == (*tokens != ""):
		return fmt.Errorf("%w: give either --expect-tokens (with --expect-prompt) or --model-check", errUsage)
	case *tokens != "" && *prompt == "":
		return fmt.Errorf("%w: --expect-tokens needs --expect-prompt", errUsage)
	case *n < 1:
		return fmt.Errorf("%w: --expect-n must be at least 1, got %d", errUsage, *n)
	}
	dir := pos[0]
	key, err := update.LoadPrivateKey(*keyPath)
	if err != nil {
		return err
	}
	opt := update.PackOptions{Name: *name, Version: *version, Model: *model,
		Compatibility: update.Compatibility{Arch: splitList(*arch), MinVersion: *minVersion, DeviceFamily: splitList(*family)},
		HealthCheck:   update.HealthCheck{Prompt: *prompt}}
	if opt.Name == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		opt.Name = filepath.Base(abs)
	}
	if opt.Model == "" {
		if opt.Model, err = update.FindModel(dir); err != nil {
			return fmt.Errorf("%w (pass --model FILE)", err)
		}
	}
	if *tokens != "" {
		for _, s := range strings.Split(*tokens, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || id < 0 {
				return fmt.Errorf("%w: --expect-tokens: %q is not a token id", errUsage, s)
			}
			opt.HealthCheck.Tokens = append(opt.HealthCheck.Tokens, int32(id))
		}
	} else {
		if opt.HealthCheck.Prompt == "" {
			opt.HealthCheck.Prompt = defaultCheckPrompt
		}
		eopt := update.CheckOptions(*threads)
		eopt.Log = log
		e, err := engine.Load(filepath.Join(dir, opt.Model), eopt)
		if err != nil {
			return err
		}
		opt.HealthCheck.Tokens, err = update.GreedyTokens(context.Background(), e, opt.HealthCheck.Prompt, *n)
		e.Close()
		if err != nil {
			return err
		}
	}
	// Write beside the target and rename: no half bundle under its name.
	tmp, err := os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	m, err := update.Pack(tmp, dir, opt, key)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: bundle %s %s, %d files, model %s, signed by key %s; health check %q -> %v\n",
		*out, m.Name, m.Version, len(m.Files), m.Model, update.KeyID(key.Public().(ed25519.PublicKey)), m.HealthCheck.Prompt, m.HealthCheck.Tokens)
	return nil
}

func updateApply(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("update apply")
	stateDir := fs.String("state-dir", defaultStateDir, "state directory: bundles/, current, update.json")
	var pubkeys multiFlag
	fs.Var(&pubkeys, "pubkey", "trusted public key file; repeatable (given, the trusted folder is not read unless --trusted-dir is also given)")
	trustedDir := fs.String("trusted-dir", defaultTrustedDir, "folder of trusted *.pub keys")
	allowDowngrade := fs.Bool("allow-downgrade", false, "install a version that is not newer than the current one")
	keep := fs.Int("keep", update.DefaultKeep, "committed bundles to keep (current and previous are always kept)")
	threads := fs.Int("threads", 0, "kernel worker threads for the health check (0 = all cores)")
	root := fs.String("root", "/", "filesystem root to detect the Jetson family under (tests use a fake tree)")
	family := fs.String("device-family", "", "device family to check the bundle against (default: detected)")
	asJSON := fs.Bool("json", false, "print the outcome as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want one BUNDLE (or - for standard input), got %d arguments", errUsage, len(pos))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var keys []update.TrustedKey
	for _, p := range pubkeys {
		k, err := update.LoadPublicKey(p)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	if len(pubkeys) == 0 || set["trusted-dir"] {
		dirKeys, err := update.LoadTrustedDir(*trustedDir)
		if err != nil {
			return err
		}
		keys = append(keys, dirKeys...)
	}
	if len(keys) == 0 {
		return fmt.Errorf("no trusted keys: %s holds no .pub file and no --pubkey was given", *trustedDir)
	}
	plat := update.Platform{Arch: runtime.GOARCH, Version: version, DeviceFamily: *family}
	if !set["device-family"] {
		board, err := power.Detect(*root)
		if err != nil {
			return err
		}
		plat.DeviceFamily = board.Family
	}
	var in io.Reader = os.Stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	eopt := update.CheckOptions(*threads)
	eopt.Log = log
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := update.Apply(ctx, in, update.Options{StateDir: *stateDir, TrustedKeys: keys, Check: update.EngineCheck(eopt),
		Platform: plat, AllowDowngrade: *allowDowngrade, DowngradeHint: "pass --allow-downgrade", Keep: *keep, Log: log})
	if *asJSON {
		if encErr := json.NewEncoder(stdout).Encode(res); encErr != nil {
			return encErr
		}
		return err
	}
	if err != nil {
		return err
	}
	was := res.Previous
	if was == "" {
		was = "none"
	}
	fmt.Fprintf(stdout, "installed %s %s (was %s): signature by key %s, health check passed, committed\nmodel: %s\n",
		res.Name, res.Version, was, res.KeyID, res.ModelPath)
	if len(res.Removed) > 0 {
		fmt.Fprintf(stdout, "removed old bundles: %s\n", strings.Join(res.Removed, ", "))
	}
	fmt.Fprintln(stdout, "a running edgellmd serves it after a restart (systemctl restart edgellmd) or through POST /admin/update")
	return nil
}

func updateStatus(args []string, stdout io.Writer) error {
	fs := newFlagSet("update status")
	stateDir := fs.String("state-dir", defaultStateDir, "state directory")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	st, err := update.ReadStatus(*stateDir)
	if *asJSON {
		if encErr := json.NewEncoder(stdout).Encode(st); encErr != nil {
			return encErr
		}
		return err
	}
	if err != nil {
		return err
	}
	show := func(label string, b *update.BundleInfo) {
		switch {
		case b == nil:
			fmt.Fprintf(stdout, "%s: none\n", label)
		case b.Error != "":
			fmt.Fprintf(stdout, "%s: %s (broken: %s)\n", label, b.Version, b.Error)
		default:
			fmt.Fprintf(stdout, "%s: %s %s, %d bytes, model %s\n", label, b.Name, b.Version, b.Bytes, b.ModelPath)
		}
	}
	show("current", st.Current)
	show("previous", st.Previous)
	if st.Trial != nil {
		fmt.Fprintf(stdout, "trial: %s since %s, not committed (the next start rolls it back)\n", st.Trial.Version, st.Trial.Started.Format("2006-01-02 15:04:05Z"))
	}
	if f := st.LastFailure; f != nil {
		fmt.Fprintf(stdout, "last failure: %s at %s: %s\n", f.Version, f.At.Format("2006-01-02 15:04:05Z"), f.Reason)
	}
	var vs []string
	for _, b := range st.Installed {
		vs = append(vs, b.Version)
	}
	fmt.Fprintf(stdout, "installed: %s\n", strings.Join(vs, ", "))
	return nil
}

func updateRollback(args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("update rollback")
	stateDir := fs.String("state-dir", defaultStateDir, "state directory")
	asJSON := fs.Bool("json", false, "print the outcome as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	res, err := update.Rollback(update.Options{StateDir: *stateDir, Log: log})
	if *asJSON {
		if encErr := json.NewEncoder(stdout).Encode(res); encErr != nil {
			return encErr
		}
		return err
	}
	if err != nil {
		if errors.Is(err, update.ErrNoPrevious) {
			return fmt.Errorf("%w: nothing to roll back to", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "rolled back to %s %s (from %s)\nmodel: %s\n", res.Name, res.Version, res.Previous, res.ModelPath)
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
