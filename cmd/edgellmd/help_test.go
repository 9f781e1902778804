package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Every command, and every subcommand of those made of subcommands,
// answers -h and --help with its usage and exit status 0, as the binary
// (a child process: flag's usage goes to the process's stderr). The
// commands are those of the usage text, so a new one is tested too.
func TestEveryCommandAnswersHelp(t *testing.T) {
	subs := map[string][]string{
		"bench":  {"decode", "agentic", "bfcl"},
		"cache":  {"stats", "clear"},
		"power":  {"status", "pin"},
		"draft":  {"fit"},
		"update": {"keygen", "pack", "apply", "status", "rollback"},
	}
	var names []string
	for _, line := range strings.Split(usage, "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "  edgellmd ") && len(f) > 1 {
			if len(names) == 0 || names[len(names)-1] != f[1] {
				names = append(names, f[1])
			}
		}
	}
	if len(names) < 12 {
		t.Fatalf("only %d commands found in the usage: %v", len(names), names)
	}
	for _, name := range names {
		if name == "version" {
			continue
		}
		cmds := [][]string{{name}}
		for _, sub := range subs[name] {
			cmds = append(cmds, []string{name, sub})
		}
		for _, cmd := range cmds {
			for _, h := range []string{"-h", "--help"} {
				args := append(append([]string(nil), cmd...), h)
				c := exec.Command(os.Args[0], args...)
				c.Env = append(os.Environ(), asMainEnv+"=1")
				out, err := c.CombinedOutput()
				if err != nil {
					t.Errorf("edgellmd %s: %v\n%s", strings.Join(args, " "), err, out)
					continue
				}
				want := "edgellmd " + strings.Join(cmd, " ")
				if name == "update" && len(cmd) == 1 {
					want = "edgellmd update keygen"
				}
				if text := strings.Join(strings.Fields(string(out)), " "); !strings.Contains(text, want) {
					t.Errorf("edgellmd %s printed no usage naming %q:\n%s", strings.Join(args, " "), want, out)
				}
			}
		}
	}
}
