package power

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// commandRunner finds the NVIDIA tools on a PATH and runs them.
type commandRunner struct {
	path    string        // PATH-style list of directories
	timeout time.Duration // per command
}

// errToolMissing is wrapped by lookPath's error when a tool is not on PATH.
var errToolMissing = errors.New("not found")

// lookPath finds an executable file called name in r.path, like exec.LookPath
// but on the PATH the controller was given rather than the process's.
func (r commandRunner) lookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(r.path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s %w on PATH %q", name, errToolMissing, r.path)
}

// run executes name with args and returns its combined output. Standard input
// is the null device: nvpmodel's "DO YOU WANT TO REBOOT NOW?" then reads EOF,
// which it takes as "no". A non-zero exit is an error that carries the output.
func (r commandRunner) run(ctx context.Context, name string, args ...string) (string, error) {
	bin, err := r.lookPath(name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	// A nil Stdin is os/exec's documented way to connect the null device.
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// If the tool leaves a child holding its output open, stop waiting for it
	// shortly after the tool itself is gone.
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	text := out.String()
	line := strings.TrimSpace(name + " " + strings.Join(args, " "))
	if ctx.Err() == context.DeadlineExceeded {
		return text, fmt.Errorf("%s: no answer within %s; it said:\n%s", line, r.timeout, clip(text))
	}
	if err != nil {
		return text, fmt.Errorf("%s: %w; it said:\n%s", line, err, clip(text))
	}
	return text, nil
}
