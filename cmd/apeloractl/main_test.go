package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

func TestCommandsAgainstTheRealServer(t *testing.T) {
	lab := incuslab.Start(t, 1)
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", e.Identity("ops", identity.ManageInfrastructure))
	do := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		return out.String(), err
	}
	// watch-audit prints events as they are recorded.
	watchCtx, stopWatch := context.WithCancel(t.Context())
	var watched producttest.SyncBuffer
	watchDone := make(chan error, 1)
	// From the newest event on, so that none is missed however late the subscription
	// starts on a loaded machine (no sleep "to let it start").
	newest := strconv.FormatInt(e.Scalar(`SELECT max(id) FROM audit_events`).(int64), 10)
	go func() {
		watchDone <- run(watchCtx, []string{"watch-audit", "-machine", "node-1", "-after", newest}, &watched)
	}()
	// watch-fleet prints the fleet, then each change: the change is made once the fleet
	// is printed (its first line, "revision N: M machines").
	var fleetWatched producttest.SyncBuffer
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- run(watchCtx, []string{"watch-fleet"}, &fleetWatched) }()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(fleetWatched.String(), " machines\n"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("watch-fleet printed no fleet within a minute:\n%s", fleetWatched.String())
		}
	}

	out, err := do("register", "node-1", "-description", "rack 4")
	if err != nil || !strings.Contains(out, "node-1") || !strings.Contains(out, "rack 4") {
		t.Fatalf("register: %v\n%s", err, out)
	}
	// (A change undone within the stream's 200 ms settle would never show.)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(fleetWatched.String(), "+ node-1") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	out, err = do("machines")
	if err != nil || !strings.Contains(out, "NAME") || !strings.Contains(out, "node-1") || !strings.Contains(out, "MANUAL") {
		t.Fatalf("machines: %v\n%s", err, out)
	}
	out, err = do("-json", "machine", "node-1")
	var m map[string]any
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || m["name"] != "node-1" {
		t.Fatalf("machine -json: %v\n%s", err, out)
	}
	// -dry-run prints the plan and changes nothing.
	out, err = do("register", "node-2", "-dry-run", "-description", "rack 5")
	if err != nil || !strings.Contains(out, "plan (nothing was changed)") || !strings.Contains(out, "DATABASE") || !strings.Contains(out, "INSERT machine_records") {
		t.Fatalf("register -dry-run: %v\n%s", err, out)
	}
	if _, err = do("machine", "node-2"); err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Fatalf("a planned register registered: %v", err)
	}
	out, err = do("approve", "node-1", "-dry-run")
	if err != nil || !strings.Contains(out, "INCUS") || !strings.Contains(out, "POST /1.0/cluster/members") {
		t.Fatalf("approve -dry-run: %v\n%s", err, out)
	}
	if _, err = do("register", "Node_1"); err == nil || !strings.Contains(err.Error(), "is not valid") {
		t.Fatalf("bad name: %v", err)
	}
	if out, err = do("whoami"); err != nil || !strings.Contains(out, "ops") {
		t.Fatalf("whoami: %v %s", err, out)
	}
	if out, err = do("unregister", "node-1"); err != nil || !strings.Contains(out, "unregistered node-1") {
		t.Fatalf("unregister: %v %s", err, out)
	}
	out, err = do("audit", "-machine", "node-1")
	if err != nil || strings.Count(out, "SUCCEEDED") != 2 || !strings.Contains(out, "unregisterMachine") || strings.Contains(out, "Node_1") {
		t.Fatalf("audit -machine node-1: %v\n%s", err, out)
	}
	out, err = do("audit")
	if err != nil || !strings.Contains(out, "REFUSED") || !strings.Contains(out, "Node_1") {
		t.Fatalf("audit: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Count(watched.String(), "node-1") < 2 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(fleetWatched.String(), "- node-1") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	stopWatch()
	if err := <-watchDone; err != nil {
		t.Fatalf("watch-audit: %v", err)
	}
	if err := <-fleetDone; err != nil {
		t.Fatalf("watch-fleet: %v", err)
	}
	if got := fleetWatched.String(); !strings.Contains(got, "revision 1: 1 machines") || !strings.Contains(got, "+ node-1 REGISTERED") ||
		!strings.Contains(got, "- node-1") || strings.Contains(got, "missed") {
		t.Fatalf("watch-fleet printed:\n%s", got)
	}
	if got := watched.String(); !strings.Contains(got, "registerMachine node-1 SUCCEEDED") || !strings.Contains(got, "unregisterMachine node-1 SUCCEEDED") || strings.Contains(got, "Node_1") {
		t.Fatalf("watch-audit printed:\n%s", got)
	}
	if _, err := do("frobnicate"); err == nil {
		t.Fatal("unknown command accepted")
	}
	t.Setenv("APELORA_TOKEN", "apl_wrong")
	if _, err := do("machines"); err == nil || !strings.Contains(err.Error(), "bearer token is not valid") {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestMAASCommands(t *testing.T) {
	lab := incuslab.Start(t, 1)
	m := producttest.StartMAAS(t, sim.Fixture{Machines: []sim.MachineSpec{
		{SystemID: "aaaa01", Hostname: "node-a", Status: 4, PowerType: "ipmi", HardwareUUID: "4c4c4544-0042-3510-8052-b7c04f4e0001"},
		{SystemID: "dddd04", Hostname: "node-busy", Status: 6, PowerType: "manual", HardwareUUID: "4c4c4544-0042-3510-8052-b7c04f4e0004", Owner: "apelora"},
	}})
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", e.Identity("ops", identity.ManageInfrastructure))
	do := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		return out.String(), err
	}
	out, err := do("fleet")
	if err != nil || !strings.Contains(out, "node-a") || !strings.Contains(out, "aaaa01") || !strings.Contains(out, "DISCOVERED") {
		t.Fatalf("fleet: %v\n%s", err, out)
	}
	// A MAAS step needs a record: register first, in any MAAS state.
	if _, err := do("commission", "dddd04"); err == nil || !strings.Contains(err.Error(), "register it first") {
		t.Fatalf("commission an unregistered machine: %v", err)
	}
	for _, reg := range [][]string{{"node-a", "aaaa01"}, {"node-busy", "dddd04"}} {
		if _, err := do("register", reg[0], "-provisioner", "MAAS", "-maas-system-id", reg[1]); err != nil {
			t.Fatalf("register %s: %v", reg[0], err)
		}
	}
	if _, err := do("commission", "dddd04"); err == nil || !strings.Contains(err.Error(), "is Deployed") {
		t.Fatalf("commission a Deployed machine: %v", err)
	}
	if out, err := do("hardware-test", "aaaa01", "-hostname", "node-a", "-tests", "smartctl-validate"); err != nil || !strings.Contains(out, "Testing") {
		t.Fatalf("hardware-test: %v\n%s", err, out)
	}
	if _, err := do("hardware-test", "aaaa01", "-hostname", "node-b"); err == nil || !strings.Contains(err.Error(), "not the hostname") {
		t.Fatalf("hardware-test with the wrong hostname: %v", err)
	}
	out, err = do("release", "dddd04")
	if err != nil || !strings.Contains(out, "disks: the disks will not be erased") {
		t.Fatalf("release: %v\n%s", err, out)
	}
}

func TestIdentityCommands(t *testing.T) {
	e := producttest.Start(t)
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", e.Identity("ops", identity.ManageInfrastructure))
	do := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		return out.String(), err
	}
	out, err := do("create-identity", "ci", "-permission", "view-infrastructure", "-expires", "36h")
	token := regexp.MustCompile(`apl_[A-Za-z0-9_-]{43}`).FindString(out)
	if err != nil || token == "" || !strings.Contains(out, "created identity ci, expiring") {
		t.Fatalf("create-identity: %v\n%s", err, out)
	}
	out, err = do("-json", "create-identity", "deploy", "-permission", "manage-infrastructure", "-expires", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	var created struct {
		Token    string
		Identity struct{ ExpiresAt *time.Time }
	}
	if err != nil || json.Unmarshal([]byte(out), &created) != nil || !strings.HasPrefix(created.Token, "apl_") || created.Identity.ExpiresAt == nil {
		t.Fatalf("create-identity -json: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"create-identity", "eraser", "-permission", "hardware.delete"}, "could do nothing"},
		{[]string{"create-identity", "root", "-permission", "root"}, `unknown permission "root"`},
		{[]string{"create-identity", "old", "-permission", "view-infrastructure", "-expires", "2020-01-01T00:00:00Z"}, "not in the future"},
		{[]string{"create-identity", "ci", "-permission", "view-infrastructure"}, "already exists"},
		{[]string{"create-identity", "-permission", "view-infrastructure"}, "usage"},
		{[]string{"create-identity", "nowhere", "-grant", "manage-infrastructure"}, "names no cluster"},
		{[]string{"create-identity", "nowhere", "-grant", "manage-infrastructure@nope"}, "no registered cluster for the grant manage-infrastructure@nope"},
		{[]string{"revoke-identity", "nobody"}, "no identity named"},
	} {
		if _, err := do(c.args...); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.says)
		}
	}

	// A grant in one cluster: rack2, a cluster record (its members are not read here).
	e.Scalar(`INSERT INTO clusters (name, socket, adopted, registered_by) VALUES ('rack2', '/nonexistent/apelora-test/rack2', true, 'test') RETURNING id`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The API learns of rack2 from NOTIFY clusters: NOT_FOUND until it has.
		out, err = do("create-identity", "rack2-ops", "-grant", "manage-infrastructure@rack2")
		if err == nil || !strings.Contains(err.Error(), "no registered cluster") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !strings.Contains(out, "created identity rack2-ops") {
		t.Fatalf("create-identity -grant: %v\n%s", err, out)
	}
	if out, err := do("identities"); err != nil || !regexp.MustCompile(`rack2-ops\s+manage-infrastructure@rack2\s`).MatchString(out) {
		t.Fatalf("identities after a grant in rack2: %v\n%s", err, out)
	}

	t.Setenv("APELORA_TOKEN", token)
	if out, err := do("whoami"); err != nil || !strings.Contains(out, "ci") {
		t.Fatalf("whoami as ci: %v %s", err, out)
	}
	t.Setenv("APELORA_TOKEN", created.Token)
	if out, err := do("revoke-identity", "ci"); err != nil || !strings.Contains(out, "revoked identity ci") {
		t.Fatalf("revoke-identity: %v %s", err, out)
	}
	out, err = do("identities")
	if err != nil || !regexp.MustCompile(`ci\s+view-infrastructure\s+revoked .* by deploy`).MatchString(out) ||
		!regexp.MustCompile(`ops\s+manage-infrastructure\s+active`).MatchString(out) || strings.Contains(out, "apl_") {
		t.Fatalf("identities:\n%s", out)
	}
	if out, err := do("-json", "identities"); err != nil || !strings.Contains(out, `"name": "ci"`) || !strings.Contains(out, `"revokedBy": "deploy"`) {
		t.Fatalf("identities -json: %v\n%s", err, out)
	}
	t.Setenv("APELORA_TOKEN", token)
	if _, err := do("whoami"); err == nil || !strings.Contains(err.Error(), `identity "ci" was revoked`) {
		t.Fatalf("whoami with a revoked token: %v", err)
	}
}

// Errors print as CODE: message, never as gqlparser's "input:3:2: …", and the exit status
// tells UNAUTHENTICATED and FORBIDDEN apart.
func TestErrorsPrintTheirCodeAndExitStatus(t *testing.T) {
	e := producttest.Start(t)
	t.Setenv("APELORA_URL", e.Base)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	manager := e.Identity("manager", identity.ManageInfrastructure)
	cases := []struct {
		name, token string
		args        []string
		status      int
		prefix      string
	}{
		{"no token", "", []string{"machines"}, exitUnauthenticated, "UNAUTHENTICATED: APELORA_TOKEN is not set"},
		{"wrong token", "apl_wrong", []string{"machines"}, exitUnauthenticated, "UNAUTHENTICATED: the bearer token is not valid"},
		{"wrong token, watching", "apl_wrong", []string{"watch-audit"}, exitUnauthenticated, "UNAUTHENTICATED: "},
		{"lacks the permission", viewer, []string{"register", "node-1"}, exitForbidden, `FORBIDDEN: identity "viewer" lacks the manage-infrastructure permission`},
		{"bad input", manager, []string{"register", "Node_1"}, exitError, `INVALID_INPUT: machine name "Node_1" is not valid`},
		{"too large", manager, []string{"register", "node-1", "-description", strings.Repeat("x", 2<<20)}, exitError, "REQUEST_TOO_LARGE: the request body is larger than"},
		{"unknown machine", manager, []string{"machine", "node-9"}, exitError, "NOT_FOUND: no machine named"},
		{"unknown command", manager, []string{"frobnicate"}, exitUsage, "usage: unknown command"},
		{"bad flag", manager, []string{"register", "node-1", "-colour", "red"}, exitUsage, "usage: register: flag provided but not defined: -colour"},
		// A plan that would be refused prints the plan, then exits as the call would.
		{"planned, lacks the permission", viewer, []string{"register", "node-1", "-dry-run"}, exitForbidden, `FORBIDDEN: identity "viewer" lacks the manage-infrastructure permission`},
		{"dry run of a read", manager, []string{"machines", "-dry-run"}, exitUsage, "usage: machines changes nothing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("APELORA_TOKEN", c.token)
			err := run(t.Context(), c.args, io.Discard)
			if err == nil || !strings.HasPrefix(err.Error(), c.prefix) || strings.Contains(err.Error(), "input:") || exitStatus(err) != c.status {
				t.Fatalf("%v: error %v, exit status %d; want %q and %d", c.args, err, exitStatus(err), c.prefix, c.status)
			}
		})
	}
	// The binary itself: stderr and exit status.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "APELORA_CTL_MAIN=register node-1", "APELORA_TOKEN="+viewer, "APELORA_URL="+e.Base)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitForbidden || !strings.HasPrefix(stderr.String(), "FORBIDDEN: ") {
		t.Fatalf("apeloractl register as a viewer: %v, stderr %q", err, stderr.String())
	}
}

// TestMain runs main itself when APELORA_CTL_MAIN holds its arguments, so that a test
// can run the test binary as apeloractl.
func TestMain(m *testing.M) {
	if args := os.Getenv("APELORA_CTL_MAIN"); args != "" {
		os.Args = append([]string{"apeloractl"}, strings.Fields(args)...)
		main()
	}
	os.Exit(m.Run())
}

// watch-audit -after prints the events recorded after that id first (each line starts
// with its id), then follows.
func TestWatchAuditAfterReplaysThenFollows(t *testing.T) {
	e := producttest.Start(t)
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", e.Identity("ops", identity.ManageInfrastructure))
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		if err := run(t.Context(), []string{"register", n}, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	first := e.Scalar(`SELECT min(id) FROM audit_events WHERE machine = 'node-a'`).(int64)
	ctx, stop := context.WithCancel(t.Context())
	var watched producttest.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"watch-audit", "-after", strconv.FormatInt(first, 10)}, &watched) }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(watched.String(), "node-c") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if err := run(t.Context(), []string{"register", "node-d"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(watched.String(), "node-d") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("watch-audit: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(watched.String()), "\n")
	if len(lines) != 3 || strings.Contains(watched.String(), "node-a") ||
		!strings.HasPrefix(lines[0], strconv.FormatInt(first+1, 10)+" ") || !strings.Contains(lines[0], "registerMachine node-b SUCCEEDED") ||
		!strings.Contains(lines[1], "node-c") || !strings.Contains(lines[2], "node-d") {
		t.Fatalf("watch-audit -after %d printed:\n%s", first, watched.String())
	}
}

// A step sent to Incus or MAAS prints as its intent and its outcome, which names it.
func TestOutcomeTextLinksAnOutcomeToItsIntent(t *testing.T) {
	for want, c := range map[string]struct {
		outcome string
		details map[string]any
	}{
		"SUCCEEDED": {"SUCCEEDED", map[string]any{}},
		"STARTED (intent: sent to Incus or MAAS next)":    {"STARTED", map[string]any{"planHash": "sha256:x"}},
		"FAILED (of intent 1234567)":                      {"FAILED", map[string]any{"intent": float64(1234567)}},
		"SUCCEEDED (of intent 41, found after a restart)": {"SUCCEEDED", map[string]any{"intent": float64(41), "recordedBy": "reconciler"}},
	} {
		if got := outcomeText(c.outcome, c.details); got != want {
			t.Errorf("outcomeText(%s, %v) = %q, want %q", c.outcome, c.details, got, want)
		}
	}
}
