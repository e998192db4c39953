package sim

import (
	"sort"
	"strings"
	"time"
)

// The simulator keeps its own copy of MAAS's enumerations instead of
// importing the client's: a shared table would hide a mistake in both.

// Node statuses (MAAS NODE_STATUS).
const (
	StatusNew                      = 0
	StatusCommissioning            = 1
	StatusFailedCommissioning      = 2
	StatusMissing                  = 3
	StatusReady                    = 4
	StatusReserved                 = 5
	StatusDeployed                 = 6
	StatusRetired                  = 7
	StatusBroken                   = 8
	StatusDeploying                = 9
	StatusAllocated                = 10
	StatusFailedDeployment         = 11
	StatusReleasing                = 12
	StatusFailedReleasing          = 13
	StatusDiskErasing              = 14
	StatusFailedDiskErasing        = 15
	StatusRescueMode               = 16
	StatusEnteringRescueMode       = 17
	StatusFailedEnteringRescueMode = 18
	StatusExitingRescueMode        = 19
	StatusFailedExitingRescueMode  = 20
	StatusTesting                  = 21
	StatusFailedTesting            = 22
)

var statusLabels = []string{
	"New", "Commissioning", "Failed commissioning", "Missing", "Ready",
	"Reserved", "Deployed", "Retired", "Broken", "Deploying", "Allocated",
	"Failed deployment", "Releasing", "Releasing failed", "Disk erasing",
	"Failed disk erasing", "Rescue mode", "Entering rescue mode",
	"Failed to enter rescue mode", "Exiting rescue mode",
	"Failed to exit rescue mode", "Testing", "Failed testing",
}

var statusFilterNames = []string{
	"new", "commissioning", "failed_commissioning", "missing", "ready",
	"reserved", "deployed", "retired", "broken", "deploying", "allocated",
	"failed_deployment", "releasing", "failed_releasing", "disk_erasing",
	"failed_disk_erasing", "rescue_mode", "entering_rescue_mode",
	"failed_entering_rescue_mode", "exiting_rescue_mode",
	"failed_exiting_rescue_mode", "testing", "failed_testing",
}

// StatusLabel returns MAAS's status_name for a status number.
func StatusLabel(s int) string {
	if s >= 0 && s < len(statusLabels) {
		return statusLabels[s]
	}
	return "Unknown"
}

func statusFromFilter(name string) (int, bool) {
	for i, n := range statusFilterNames {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// Script statuses (MAAS SCRIPT_STATUS), plus -1 for "nothing ran".
const (
	ScriptUnknown          = -1
	ScriptPending          = 0
	ScriptRunning          = 1
	ScriptPassed           = 2
	ScriptFailed           = 3
	ScriptTimedOut         = 4
	ScriptAborted          = 5
	ScriptDegraded         = 6
	ScriptInstalling       = 7
	ScriptFailedInstalling = 8
	ScriptSkipped          = 9
	ScriptApplyingNetconf  = 10
	ScriptFailedNetconf    = 11
)

var scriptLabels = []string{
	"Pending", "Running", "Passed", "Failed", "Timed out", "Aborted",
	"Degraded", "Installing dependencies", "Failed installing dependencies",
	"Skipped", "Applying custom network configuration",
	"Failed to apply custom network configuration",
}

func scriptLabel(s int) string {
	if s >= 0 && s < len(scriptLabels) {
		return scriptLabels[s]
	}
	return "Unknown"
}

// outcomes accepted in fixtures and SetTestOutcome.
var outcomeNames = map[string]int{
	"passed": ScriptPassed, "failed": ScriptFailed, "timedout": ScriptTimedOut,
	"timed_out": ScriptTimedOut, "degraded": ScriptDegraded, "skipped": ScriptSkipped,
	"aborted": ScriptAborted, "pending": ScriptPending, "running": ScriptRunning,
}

// Hardware types (MAAS HARDWARE_TYPE).
const (
	hwNode    = 0
	hwCPU     = 1
	hwMemory  = 2
	hwStorage = 3
	hwNetwork = 4
	hwGPU     = 5
)

var hwTypeTags = map[int]string{hwNode: "node", hwCPU: "cpu", hwMemory: "memory", hwStorage: "storage", hwNetwork: "network", hwGPU: "gpu"}

type script struct {
	name        string
	hwType      int
	destructive bool
	tags        []string
}

// builtinTests are MAAS's built-in testing scripts. Every script carries the
// tag of its hardware type and "destructive" when it is (MAAS Script.save).
var builtinTests = func() []script {
	raw := []script{
		{name: "smartctl-validate", hwType: hwStorage, tags: []string{"commissioning"}},
		{name: "smartctl-short", hwType: hwStorage},
		{name: "smartctl-long", hwType: hwStorage},
		{name: "smartctl-conveyance", hwType: hwStorage},
		{name: "badblocks", hwType: hwStorage},
		{name: "badblocks-destructive", hwType: hwStorage, destructive: true},
		{name: "fio", hwType: hwStorage, destructive: true},
		{name: "memtester", hwType: hwMemory},
		{name: "stress-ng-cpu-short", hwType: hwCPU},
		{name: "stress-ng-cpu-long", hwType: hwCPU},
		{name: "stress-ng-memory-short", hwType: hwMemory},
		{name: "stress-ng-memory-long", hwType: hwMemory},
		{name: "7z", hwType: hwCPU},
		{name: "ntp", hwType: hwNode, tags: []string{"ntp", "internet"}},
		{name: "internet-connectivity", hwType: hwNetwork, tags: []string{"internet", "network-validation"}},
		{name: "gateway-connectivity", hwType: hwNetwork, tags: []string{"network-validation"}},
		{name: "rack-controller-connectivity", hwType: hwNetwork, tags: []string{"network-validation"}},
	}
	for i := range raw {
		raw[i].tags = append(raw[i].tags, hwTypeTags[raw[i].hwType])
		if raw[i].destructive {
			raw[i].tags = append(raw[i].tags, "destructive")
		}
	}
	return raw
}()

func scriptByName(name string) (script, bool) {
	for _, s := range builtinTests {
		if s.name == name {
			return s, true
		}
	}
	return script{}, false
}

// selectTests resolves a testing_scripts value (names or tags, one
// comma-separated value) the way MAAS's form does. bad is the first entry
// that matches nothing.
func selectTests(value string) (selected []script, none bool, bad string) {
	seen := map[string]bool{}
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if entry == "none" {
			none = true
			continue
		}
		matched := false
		for _, s := range builtinTests {
			if s.name == entry || contains(s.tags, entry) {
				matched = true
				if !seen[s.name] {
					seen[s.name] = true
					selected = append(selected, s)
				}
			}
		}
		if !matched {
			return nil, false, entry
		}
	}
	return selected, none, ""
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// aggregate is MAAS's machine-level script status (models/scriptset.py
// get_status_from_qs): aborted results are dropped; nothing left is -1.
func aggregate(results []scriptResult, hwFilter func(int) bool) int {
	var has [12]bool
	n := 0
	for _, r := range results {
		if r.status == ScriptAborted || (hwFilter != nil && !hwFilter(r.hwType)) {
			continue
		}
		if r.status >= 0 && r.status < len(has) {
			has[r.status] = true
		}
		n++
	}
	switch {
	case n == 0:
		return ScriptUnknown
	case has[ScriptRunning] || has[ScriptApplyingNetconf] || has[ScriptInstalling]:
		return ScriptRunning
	case has[ScriptPending]:
		return ScriptPending
	case has[ScriptFailed] || has[ScriptTimedOut] || has[ScriptFailedInstalling] || has[ScriptFailedNetconf]:
		return ScriptFailed
	case has[ScriptDegraded]:
		return ScriptDegraded
	default:
		return ScriptPassed
	}
}

func aggregateLabel(s int) string {
	if s == ScriptUnknown {
		return "Unknown"
	}
	return scriptLabel(s)
}

type scriptResult struct {
	name   string
	hwType int
	status int
	// started and ended are zero until the script starts and ends (MAAS's null).
	started, ended time.Time
}

// set moves a result to status at now, stamping when it started and ended as MAAS does: a
// script starts when it runs and ends when it has an outcome; pending has neither, and an
// aborted script that never ran has no start.
func (r *scriptResult) set(status int, now time.Time) {
	r.status = status
	switch status {
	case ScriptPending:
		r.started, r.ended = time.Time{}, time.Time{}
	case ScriptRunning:
		r.started, r.ended = now, time.Time{}
	default:
		if r.ended.IsZero() {
			r.ended = now
		}
	}
}

func setAll(rs []scriptResult, status int, now time.Time) {
	for i := range rs {
		rs[i].set(status, now)
	}
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
