package daemon

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A daemon whose api.max_connections does not fit in the open-files limit
// says so at start, naming both numbers and the fix; one that fits says
// nothing.
func TestWarnsWhenMaxConnectionsExceedsOpenFiles(t *testing.T) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	low := rl
	low.Cur = 300
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
			t.Error(err)
		}
	})
	for _, c := range []struct {
		max  int
		warn bool
	}{{1000, true}, {200, false}} {
		notes := notifySocket(t)
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "edgellmd.yaml")
		writeConfig(t, cfgPath, "listen: 127.0.0.1:0\nmodel:\n  path: "+storiesModel+"\n  threads: 1\ncache:\n  dir: "+dir+
			"\n  persist: false\napi:\n  max_connections: "+strconv.Itoa(c.max)+"\n  max_connections_per_client: 8\n")
		var logs syncBuffer
		runUntilReady(t, notes, Options{ConfigPath: cfgPath, LogOutput: &logs, ConfigDebounce: -1})
		want := "api.max_connections is " + strconv.Itoa(c.max) + ", but the open-files limit (RLIMIT_NOFILE) is 300"
		if got := strings.Contains(logs.String(), want); got != c.warn {
			t.Errorf("max_connections %d, RLIMIT_NOFILE 300: warned %v, want %v:\n%s", c.max, got, c.warn, logs.String())
		}
		if c.warn && !strings.Contains(logs.String(), "LimitNOFILE=") {
			t.Errorf("the warning does not say how to fix it:\n%s", logs.String())
		}
	}
	if err := fitsOpenFiles(1<<20, unix.RLIM_INFINITY); err != nil {
		t.Errorf("an unlimited RLIMIT_NOFILE: %v", err)
	}
}
