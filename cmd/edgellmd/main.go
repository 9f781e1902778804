// Command edgellmd is the edge LLM appliance: one binary with subcommands.
// It parses flags and calls into the packages; the logic lives there.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/edgellmd/edgellmd/daemon"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `edgellmd: an edge LLM appliance with an OpenAI-compatible endpoint.

Usage:
  edgellmd serve    [-c /etc/edgellmd/edgellmd.yaml] [--model MODEL.gguf] [--listen 127.0.0.1:8001] [--device auto|cpu|gpu|gpu:N]
                    [--log-level info] [--check-config]
  edgellmd reload   --pid PID                                SIGHUP to a running edgellmd serve: it re-reads its config (the unit's ExecReload=)
  edgellmd run      -m MODEL.gguf -p PROMPT [-n 64] [--temp 0] [--top-k K] [--top-p P] [--seed 42] [--json] [--ignore-eos] [--special=false]
                    [--kv f16|f32] [--device auto|cpu|gpu|gpu:N] [--draft off|linear|tree] [--draft-steps 8] [--draft-top-k 2] [--draft-nodes 16] [--drafters mtp,suffix]
  edgellmd devices  [--json]                                 the Vulkan devices, and what --device auto picks
  edgellmd quantize IN.gguf OUT.gguf --type nvfp4 [--keep PATTERN]...
  edgellmd convert  HF_DIR OUT.gguf [--outtype f32|f16|bf16] [--no-mtp]
  edgellmd synth    --arch qwen35 --size tiny|small|bench|27b [--layers N] [--type F16] [--tokenizer tokenizer.json] [--mtp] --seed N -o OUT.gguf
  edgellmd bench    decode -m MODEL.gguf [--prompt-tokens 512] [--gen 128] [--threads 1] [--runs 3] [--device auto|cpu|gpu|gpu:N] [--json]
  edgellmd bench    agentic --dataset TRACE.jsonl [--url http://127.0.0.1:8001] [--conversations N] [--turns N] [--out DIR]
  edgellmd bench    bfcl --dataset FILE [--url http://127.0.0.1:8001] [--limit N]
  edgellmd power    status|pin [--root /] [--mode MAXN] [--jetson-clocks] [--json]
  edgellmd draft    fit -m MODEL.gguf -o OUT.gguf [--tokens 16384]
  edgellmd update   keygen -o KEYBASE | pack --key KEY --version V [--model-check] DIR -o BUNDLE
                    | apply BUNDLE [--pubkey KEY]... [--allow-downgrade] | status [--json] | rollback
                    [--state-dir /var/lib/edgellmd]
  edgellmd cache    stats|clear [-c /etc/edgellmd/edgellmd.yaml] [--dir DIR] [--json]
  edgellmd version

Run "edgellmd COMMAND -h" for a command's flags.
`

// errUsage marks a command-line mistake: exit status 2 after the message.
var errUsage = errors.New("usage")

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	log, err := daemon.NewLogger(stderr, daemon.LogAuto, logLevel())
	if err != nil {
		fmt.Fprintln(stderr, "edgellmd:", err)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		err = cmdRun(rest, stdout, log)
	case "synth":
		err = cmdSynth(rest, stdout, log)
	case "quantize":
		err = cmdQuantize(rest, stdout, log)
	case "bench":
		err = cmdBench(rest, stdout, log)
	case "power":
		err = cmdPower(rest, stdout, log)
	case "cache":
		err = cmdCache(rest, stdout, log)
	case "draft":
		err = cmdDraft(rest, stdout, log)
	case "update":
		err = cmdUpdate(rest, stdout, log)
	case "convert":
		err = cmdConvert(rest, stdout, log)
	case "serve":
		err = cmdServe(rest, stdout, log)
	case "reload":
		err = cmdReload(rest, stdout, log)
	case "devices":
		err = cmdDevices(rest, stdout, log)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "edgellmd", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "edgellmd: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "edgellmd %s: %v\n", cmd, err)
		return 2
	default:
		fmt.Fprintf(stderr, "edgellmd %s: %v\n", cmd, err)
		return 1
	}
}

// logLevel is EDGELLMD_LOG_LEVEL, or "warn" so that one-shot commands print
// only their results.
func logLevel() string {
	if l := os.Getenv("EDGELLMD_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

// parseFlags parses flags that may come before, between or after positional
// arguments, and returns the positional ones.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// newFlagSet makes a command's flag set; its -h/--help prints the
// command's lines of the usage, then its flags.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("edgellmd "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n%s\nFlags of edgellmd %s:\n", commandUsage(name), name)
		fs.PrintDefaults()
	}
	return fs
}

// isHelp says whether a command's first argument asks for its usage.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// commandUsage is the lines of the usage text (updateUsage for update's
// subcommands) for name, "cmd" or "cmd sub": the synopsis lines of cmd
// (those of sub alone when it has its own), with their continuation lines.
func commandUsage(name string) string {
	cmd, sub, _ := strings.Cut(name, " ")
	text := usage
	if cmd == "update" && sub != "" {
		text = updateUsage
	}
	pick := func(sub string) string {
		var b strings.Builder
		in := false
		for _, line := range strings.Split(text, "\n") {
			switch {
			case strings.HasPrefix(line, "  edgellmd "):
				f := strings.Fields(line)
				in = len(f) > 1 && f[1] == cmd && (sub == "" || len(f) > 2 && f[2] == sub)
			case !strings.HasPrefix(line, "    "):
				in = false
			}
			if in {
				b.WriteString(line + "\n")
			}
		}
		return b.String()
	}
	if u := pick(sub); u != "" {
		return u
	}
	return pick("")
}

// groupHelp prints the usage of a command made of subcommands (bench,
// cache, power, draft) for its -h.
func groupHelp(stdout io.Writer, cmd string) error {
	fmt.Fprintf(stdout, "Usage:\n%s\nRun \"edgellmd %s SUBCOMMAND -h\" for a subcommand's flags.\n", commandUsage(cmd), cmd)
	return nil
}
