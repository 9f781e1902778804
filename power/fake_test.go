package power

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// fakeNvpmodel is a stand-in for NVIDIA's nvpmodel: it logs each call (its
// arguments, what its standard input is and how many bytes it could read
// from it) to calls.log, answers -q from its mode file, -p with a recorded
// `nvpmodel -p --verbose` output, and -m <id> either with a recorded answer
// (m<id>.txt, exit status in m<id>.rc, mode unchanged) or by switching mode
// silently, as the real tool does when no reboot is needed.
const fakeNvpmodel = `#!/bin/sh
d=$(dirname "$0")
in=$(readlink /proc/$$/fd/0 2>/dev/null || echo unknown)
n=$(cat | wc -c | tr -d ' ')
echo "nvpmodel $* | stdin=$in bytes=$n" >> "$d/calls.log"
mode=$(cat "$d/mode")
case "$1" in
-q)
	[ -f "$d/q-prefix.txt" ] && cat "$d/q-prefix.txt"
	name=$(sed -n "s/.*POWER_MODEL: ID=$mode NAME=\([^ ]*\).*/\1/p" "$d/p-verbose.txt")
	printf 'NV Power Mode: %s\n%s\n' "$name" "$mode"
	;;
-p)
	cat "$d/p-verbose.txt"
	;;
-m)
	if [ -f "$d/m$2.txt" ]; then
		cat "$d/m$2.txt"
		exit "$(cat "$d/m$2.rc" 2>/dev/null || echo 0)"
	fi
	echo "$2" > "$d/mode"
	;;
*)
	echo "fake nvpmodel: unexpected arguments: $*" >&2
	exit 64
	;;
esac
`

// fakeJetsonClocks logs its calls and plays back jc.txt / jc.rc if present.
const fakeJetsonClocks = `#!/bin/sh
d=$(dirname "$0")
in=$(readlink /proc/$$/fd/0 2>/dev/null || echo unknown)
n=$(cat | wc -c | tr -d ' ')
echo "jetson_clocks $* | stdin=$in bytes=$n" >> "$d/calls.log"
if [ -f "$d/jc.txt" ]; then
	cat "$d/jc.txt"
	exit "$(cat "$d/jc.rc" 2>/dev/null || echo 0)"
fi
`

// fakeTools is a directory holding the fake tools, used as the PATH.
type fakeTools struct {
	t   *testing.T
	dir string
}

// newFakeTools puts fake nvpmodel and jetson_clocks for board (a folder of
// testdata/nvpmodel) in a temporary directory, with the current mode id.
func newFakeTools(t *testing.T, board string, mode int) *fakeTools {
	t.Helper()
	f := &fakeTools{t: t, dir: t.TempDir()}
	f.write("nvpmodel", fakeNvpmodel, 0o755)
	f.write("jetson_clocks", fakeJetsonClocks, 0o755)
	f.copy(filepath.Join("testdata/nvpmodel", board, "p-verbose.txt"), "p-verbose.txt")
	f.setMode(mode)
	return f
}

func (f *fakeTools) write(name, content string, perm os.FileMode) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), perm); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeTools) copy(src, name string) {
	f.t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		f.t.Fatal(err)
	}
	f.write(name, string(b), 0o644)
}

// setMode changes the mode behind the controller's back (drift).
func (f *fakeTools) setMode(id int) { f.write("mode", strconv.Itoa(id)+"\n", 0o644) }

func (f *fakeTools) mode() int {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "mode"))
	if err != nil {
		f.t.Fatal(err)
	}
	id, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// answerSet makes `nvpmodel -m id` print a recorded answer (a file of
// testdata/nvpmodel/set) with exit status rc, and leave the mode alone.
func (f *fakeTools) answerSet(id int, file string, rc int) {
	f.copy(filepath.Join("testdata/nvpmodel/set", file), "m"+strconv.Itoa(id)+".txt")
	f.write("m"+strconv.Itoa(id)+".rc", strconv.Itoa(rc)+"\n", 0o644)
}

func (f *fakeTools) answerJetsonClocks(file string, rc int) {
	f.copy(filepath.Join("testdata/nvpmodel/set", file), "jc.txt")
	f.write("jc.rc", strconv.Itoa(rc)+"\n", 0o644)
}

// calls returns the logged calls, without the stdin details.
func (f *fakeTools) calls() []string {
	var out []string
	for _, c := range f.rawCalls() {
		cmd, _, _ := strings.Cut(c, " | ")
		out = append(out, strings.TrimSpace(cmd))
	}
	return out
}

// rawCalls returns the logged lines: "nvpmodel -m 0 | stdin=/dev/null bytes=0".
func (f *fakeTools) rawCalls() []string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "calls.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (f *fakeTools) resetCalls() { os.Remove(filepath.Join(f.dir, "calls.log")) }

// newTestController builds a controller on a fake root with the fake tools.
func newTestController(t *testing.T, root string, tools *fakeTools, opts Options) (*Controller, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	opts.Root = filepath.Join("testdata/root", root)
	opts.Path = tools.dir
	opts.Logger = zerolog.New(&logs)
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, &logs
}
