package incuslab

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// WaitStopped waits until every thread of process pid is stopped (state T or t), at most
// within. kill(2) returns once SIGSTOP is queued, not once it took effect: a thread still
// running answers one more request or sends one more call (seen under load: a MAAS
// simulator "hung" right before a registration answered it). Every test that freezes a
// process with SIGSTOP waits here before relying on it.
func WaitStopped(pid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return fmt.Errorf("incuslab: the threads of process %d: %v (has it exited?)", pid, err)
		}
		stopped := 0
		for _, f := range tasks {
			// The state follows the command's closing parenthesis: "pid (comm) S ...".
			if b, err := os.ReadFile(f); err == nil {
				if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
					stopped++
				}
			}
		}
		if stopped == len(tasks) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("incuslab: %d of %d threads of process %d stopped %s after SIGSTOP", stopped, len(tasks), pid, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
