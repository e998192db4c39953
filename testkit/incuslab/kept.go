package incuslab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A kept lab (Options.Keep) outlives the process that started it; these find its daemons
// again from what it recorded in its directory.

// KeptMember is one daemon of a kept lab.
type KeptMember struct {
	Name, Address, Dir string
	PID                int
	State              string // running, frozen, dead
}

// Kept lists the members recorded in dir, m1 first.
func Kept(dir string) ([]KeptMember, error) {
	if _, err := os.Stat(filepath.Join(dir, Marker)); err != nil {
		return nil, fmt.Errorf("%s holds no lab (no %s)", dir, Marker)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []KeptMember
	for _, e := range entries {
		mdir := filepath.Join(dir, e.Name())
		pid, err := os.ReadFile(filepath.Join(mdir, "pid"))
		if !e.IsDir() || err != nil {
			continue
		}
		addr, _ := os.ReadFile(filepath.Join(mdir, "address"))
		m := KeptMember{Name: e.Name(), Address: strings.TrimSpace(string(addr)), Dir: mdir}
		m.PID, _ = strconv.Atoi(strings.TrimSpace(string(pid)))
		m.State = keptState(m)
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(out[i].Name, "m"))
		b, _ := strconv.Atoi(strings.TrimPrefix(out[j].Name, "m"))
		return a < b || a == b && out[i].Name < out[j].Name
	})
	return out, nil
}

// keptState says whether the recorded pid is still this member's incusd.
func keptState(m KeptMember) string {
	if m.PID <= 0 {
		return "dead"
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", m.PID))
	if err != nil || !strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), "--logfile "+filepath.Join(m.Dir, "incusd.log")) {
		return "dead"
	}
	switch procState(m.PID) {
	case "", "Z":
		return "dead"
	case "T", "t":
		return "frozen"
	}
	return "running"
}

// procState is a process's state letter from /proc, "" when it is gone.
func procState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	_, rest, ok := strings.Cut(string(stat), ") ")
	if !ok || rest == "" {
		return ""
	}
	return rest[:1]
}

// Stop kills the daemons of the kept lab in dir by process group, waits for them,
// unmounts what they mounted and removes dir. It refuses a directory that is not a kept
// lab's, and does nothing when dir does not exist.
func Stop(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	members, err := Kept(dir)
	if err != nil {
		return fmt.Errorf("not touching %s: %w", dir, err)
	}
	for _, m := range members {
		if m.State != "dead" {
			_ = syscall.Kill(-m.PID, syscall.SIGKILL)
		}
	}
	var errs []error
	for _, m := range members {
		if m.State == "dead" {
			continue
		}
		deadline := time.Now().Add(killTimeout)
		for procState(m.PID) != "" && procState(m.PID) != "Z" {
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("%s (pid %d) did not exit after SIGKILL", m.Name, m.PID))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// KeptCommand is the incus CLI with args against member m of the kept lab in dir.
func KeptCommand(dir, cli string, m KeptMember, args ...string) *exec.Cmd {
	cmd := exec.Command(cli, args...)
	cmd.Env = append(cleanEnv(), "INCUS_DIR="+m.Dir, "INCUS_CONF="+filepath.Join(dir, "cli"))
	return cmd
}
