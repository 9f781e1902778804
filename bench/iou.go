package bench

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// The harness's inline accuracy for coding trajectories
// (mlcommons/endpoints, AgenticInferenceInlineScorer): the executables of an
// answer's bash tool calls, compared as multisets with the recorded answer's.

// executableAliases maps an executable's name to the action it counts as;
// names not here are dropped.
var executableAliases = map[string]string{
	"python": "python", "python2": "python", "python3": "python", "py": "python",
	"pip": "pip", "pip3": "pip",
	"pytest": "pytest", "pylint": "pylint",
	"sphinx-build": "sphinx", "sphinx-quickstart": "sphinx",
	"cython": "cython", "make": "make", "conda": "conda",
	"cat": "cat", "less": "cat", "more": "cat",
	"head": "head", "tail": "tail", "wc": "wc", "diff": "diff",
	"grep": "grep", "egrep": "grep", "fgrep": "grep", "rg": "grep", "ag": "grep",
	"sed": "sed", "awk": "awk", "gawk": "awk",
	"tr": "tr", "sort": "sort", "uniq": "uniq", "cut": "cut",
	"find": "find", "locate": "find", "ls": "ls", "xargs": "xargs",
	"cp": "cp", "mv": "mv", "rm": "rm", "mkdir": "mkdir", "touch": "touch", "tee": "tee",
	"source": "source", ".": "source",
	"which": "which", "alias": "alias", "unset": "unset", "export": "export",
	"git": "git", "curl": "curl", "wget": "curl",
	"true": "true", "false": "false", "timeout": "timeout", "date": "date",
	"apt-get": "apt", "apt": "apt", "yum": "yum",
}

// shellWrappers are leading words that run the next word as the command.
var shellWrappers = map[string]bool{"env": true, "time": true, "nice": true, "sudo": true, "exec": true, "command": true}

var (
	quotedRE    = regexp.MustCompile(`'[^']*'|"(?:[^"\\]|\\.)*"|` + "`[^`]*`")
	separatorRE = regexp.MustCompile(`\|\||\||&&|;|\n`)
	envAssignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	// A version suffix such as python3.11's ".11" (or ".11.4").
	// (Python's \d is any Unicode decimal digit.)
	versionSuffixRE = regexp.MustCompile(`\.\p{Nd}+(\.\p{Nd}+)?$`)
)

// BashActions lists the actions of the bash tool calls among calls, in
// order: for each call named "bash" whose arguments are a JSON object with a
// string "command" (or "cmd"), quoted strings are blanked, the command is
// split into stages at ||, |, &&, ; and newlines, each stage loses its
// leading VAR=value assignments and wrappers (env time nice sudo exec
// command), and its executable — basename, lower-cased, version suffix
// removed — is mapped through the alias table. Unknown executables are
// dropped.
func BashActions(calls []chat.ToolCall) []string {
	var actions []string
	for _, c := range calls {
		if c.Function.Name != "bash" {
			continue
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
			continue
		}
		// Python's `args.get("command") or args.get("cmd")`, then a string check.
		v := args["command"]
		if !pyTruthy(v) {
			v = args["cmd"]
		}
		cmd, ok := v.(string)
		if !ok {
			continue
		}
		actions = append(actions, commandActions(cmd)...)
	}
	return actions
}

func commandActions(cmd string) []string {
	var actions []string
	cmd = quotedRE.ReplaceAllString(cmd, " ")
	for _, stage := range separatorRE.Split(cmd, -1) {
		words := strings.FieldsFunc(stage, isPySpace)
		for len(words) > 0 && (envAssignRE.MatchString(words[0]) || shellWrappers[words[0]]) {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		exe := words[0]
		if i := strings.LastIndexByte(exe, '/'); i >= 0 {
			exe = exe[i+1:]
		}
		exe = versionSuffixRE.ReplaceAllString(strings.ToLower(exe), "")
		if a, ok := executableAliases[exe]; ok {
			actions = append(actions, a)
		}
	}
	return actions
}

// pyTruthy is Python's truth value of a decoded JSON value.
func pyTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// isPySpace is what Python's str.split() splits on: Unicode whitespace plus
// the ASCII separators U+001C..U+001F.
func isPySpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// IoU is the multiset intersection over union of two action lists:
// |want ∩ got| / |want ∪ got|, counting repeats. Two empty lists score 1.
func IoU(want, got []string) float64 {
	a, b := map[string]int{}, map[string]int{}
	for _, s := range want {
		a[s]++
	}
	for _, s := range got {
		b[s]++
	}
	inter, union := 0, 0
	for k, n := range a {
		inter += min(n, b[k])
		union += max(n, b[k])
	}
	for k, n := range b {
		if _, ok := a[k]; !ok {
			union += n
		}
	}
	if union == 0 {
		return 1
	}
	return float64(inter) / float64(union)
}
