package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// evacuate and restore on a real 2-member cluster: each exits 0 when the change was made
// (they exited 1 while the answer's startedAt erred), prints the maintenance
// task and its Incus operation, and -json carries the task whole.
func TestEvacuateAndRestoreExitZeroOnSuccess(t *testing.T) {
	lab := incuslab.Start(t, 2)
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	env := []string{"APELORA_URL=" + e.Base, "APELORA_TOKEN=" + e.Identity("ops", identity.ManageInfrastructure)}
	m2 := lab.Members[1].Name
	// ended waits (bounded) until the member's latest maintenance task is seen to end, SUCCEEDED.
	ended := func(action string) {
		t.Helper()
		var last any
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			d := e.MustGQL(strings.TrimPrefix(env[1], "APELORA_TOKEN="), `query($n: String!) { maintenanceTasks(name: $n) { action outcome } }`, map[string]any{"n": m2})
			tasks := d["maintenanceTasks"].([]any)
			if len(tasks) > 0 {
				last = tasks[0]
				if task := tasks[0].(map[string]any); task["action"] == action && task["outcome"] != nil {
					if task["outcome"] != "SUCCEEDED" {
						t.Fatalf("%s of %s ended %v", action, m2, task)
					}
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the %s of %s did not end: %v", action, m2, last)
			}
		}
	}

	stdout, stderr, status := ctl(t, env, "-json", "evacuate", m2)
	var p struct {
		Task struct {
			Id, IncusOperation string
			StartedAt          time.Time
			Action             string
		}
	}
	if status != 0 || stderr != "" || json.Unmarshal([]byte(stdout), &p) != nil || p.Task.Action != "EVACUATE" ||
		p.Task.IncusOperation == "" || p.Task.StartedAt.IsZero() {
		t.Fatalf("apeloractl -json evacuate %s: exit %d, stderr %q, stdout %s", m2, status, stderr, stdout)
	}
	ended("EVACUATE")

	stdout, stderr, status = ctl(t, env, "restore", m2)
	if status != 0 || stderr != "" || !regexp.MustCompile(`restoring `+m2+` \(maintenance task [0-9]+, Incus operation [0-9a-f-]{36}\)`).MatchString(stdout) {
		t.Fatalf("apeloractl restore %s: exit %d, stderr %q, stdout %s", m2, status, stderr, stdout)
	}
	ended("RESTORE")

	stdout, stderr, status = ctl(t, env, "evacuate", m2)
	if status != 0 || stderr != "" || !regexp.MustCompile(`evacuating `+m2+` \(maintenance task [0-9]+, Incus operation [0-9a-f-]{36}\)`).MatchString(stdout) {
		t.Fatalf("apeloractl evacuate %s: exit %d, stderr %q, stdout %s", m2, status, stderr, stdout)
	}
	ended("EVACUATE")
	// A second evacuation is refused for what it is: there is nothing left to do.
	_, stderr, status = ctl(t, env, "evacuate", m2)
	if status != exitError || !strings.HasPrefix(stderr, "FAILED_PRECONDITION: ") {
		t.Fatalf("evacuating an evacuated member: exit %d, %q", status, stderr)
	}
}
