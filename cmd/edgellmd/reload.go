package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/rs/zerolog"
)

// cmdReload sends SIGHUP to a running `edgellmd serve`, which re-reads its
// config file. It is the unit's ExecReload= (with --pid $MAINPID): systemd
// runs a command there, and /bin/kill belongs to procps, which a minimal
// Debian or a trimmed Jetson image lacks (the reload then failed with
// 203/EXEC). The pid is checked first, because SIGHUP stops any program that
// does not handle it: only an edgellmd serve process is signalled.
func cmdReload(args []string, stdout io.Writer, _ zerolog.Logger) error {
	fs := newFlagSet("reload")
	pidArg := fs.String("pid", os.Getenv("MAINPID"), "process id of the running edgellmd serve (default $MAINPID, which systemd sets for ExecReload=; by hand: systemctl show -P MainPID edgellmd)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	if *pidArg == "" {
		return fmt.Errorf("%w: --pid is required: the process id of edgellmd serve (systemctl show -P MainPID edgellmd); to reload the service, run systemctl reload edgellmd", errUsage)
	}
	pid, err := strconv.Atoi(*pidArg)
	if err != nil || pid <= 0 {
		// 0 and negative pids would make kill(2) signal whole process groups.
		return fmt.Errorf("%w: --pid %q: want a process id, a whole number above 0", errUsage, *pidArg)
	}
	if err := sendReload(pid); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sent SIGHUP to edgellmd serve (pid %d): it reloads its config file and logs what it applied\n", pid)
	return nil
}

// sendReload sends SIGHUP to pid if pid is an edgellmd serve process: its
// /proc/PID/comm is "edgellmd" (or this program's own name, for a binary
// installed under another one) and its first argument is "serve".
//
// os.FindProcess holds a pidfd (Linux 5.3+; Go falls back to kill(2)
// elsewhere), taken before the checks: if the process exits and its pid is
// reused meanwhile, the signal fails instead of reaching the newcomer.
func sendReload(pid int) error {
	p, err := os.FindProcess(pid) // never fails on Linux
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	defer p.Release()
	procDir := filepath.Join("/proc", strconv.Itoa(pid))
	comm, err := os.ReadFile(filepath.Join(procDir, "comm"))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no process %d: is edgellmd running? (systemctl status edgellmd)", pid)
	}
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	name := string(bytes.TrimSuffix(comm, []byte("\n")))
	if name != "edgellmd" && name != ownComm() {
		return fmt.Errorf("process %d is %q, not edgellmd: not signalling it", pid, name)
	}
	cmdline, err := os.ReadFile(filepath.Join(procDir, "cmdline"))
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	if len(cmdline) == 0 { // a zombie: it has exited
		return fmt.Errorf("process %d has exited: is edgellmd running? (systemctl status edgellmd)", pid)
	}
	argv := bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0})
	if len(argv) < 2 || string(argv[1]) != "serve" {
		sub := "with no command"
		if len(argv) >= 2 {
			sub = strconv.Quote(string(argv[1]))
		}
		return fmt.Errorf("process %d is edgellmd %s, not edgellmd serve: SIGHUP would stop it, not reload it", pid, sub)
	}
	switch err := p.Signal(syscall.SIGHUP); {
	case errors.Is(err, os.ErrProcessDone):
		return fmt.Errorf("process %d exited before it could be signalled", pid)
	case errors.Is(err, syscall.EPERM):
		return fmt.Errorf("signal process %d: %w: run this as root or as the user the daemon runs as (_edgellmd)", pid, err)
	case err != nil:
		return fmt.Errorf("signal process %d: %w", pid, err)
	}
	return nil
}

// ownComm is this process's name as the kernel keeps it (the executable's
// base name, cut to 15 bytes), or "" when /proc says nothing.
func ownComm() string {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSuffix(b, []byte("\n")))
}
