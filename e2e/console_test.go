package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// The console's end-to-end tests drive Debian's Chromium with playwright-core (a node
// script in web/console/e2e/) against the real product: apelora's server on a real
// PostgreSQL, a real Incus lab and the MAAS simulator. The script calls back into the test
// (a control server on loopback) for what a browser cannot do: stop the simulator, run a
// report from elsewhere, expire the session.

const chromiumPath = "/usr/bin/chromium"

// consoleTools finds node, Chromium and the console's npm packages, or skips (fails under
// CI=true, where scripts/test.sh installs them).
func consoleTools(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs("../web/console")
	if err != nil {
		t.Fatal(err)
	}
	missing := func(what string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("console end-to-end test: %s (scripts/test.sh installs it)", what)
		}
		t.Skipf("SKIPPED LOUDLY: console end-to-end test: %s; run web/console/build.sh and `apt-get install chromium`", what)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		missing("Debian's Chromium is not at " + chromiumPath)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		missing("web/console/node_modules lacks playwright-core")
	}
	return node, dir
}

// shotsDir is where screenshots go: APELORA_CONSOLE_SHOTS, or a folder under the system's
// temporary folder that outlives the test, so a person can look at them. The folder is
// held (an flock on name.lock beside it) until the test ends: the same test in another
// go test process on the machine (another checkout's CI) waits rather than empty the
// folder under it (the layout test reads its screenshots back).
func shotsDir(t *testing.T, name string) string {
	base := os.Getenv("APELORA_CONSOLE_SHOTS")
	if base == "" {
		base = filepath.Join(os.TempDir(), "apelora-console-shots")
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(base, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Logf("screenshots: %s is in use by another test process; waiting for it", filepath.Join(base, name))
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
	}
	d := filepath.Join(base, name)
	_ = os.RemoveAll(d)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", d)
	fmt.Printf("console screenshots: %s\n", d)
	return d
}

// control serves the script's callbacks on loopback.
type control struct {
	mu      sync.Mutex
	secrets []string // what the browser saw that must never be logged or stored
	mux     *http.ServeMux
}

func newControl() *control {
	c := &control{mux: http.NewServeMux()}
	c.mux.HandleFunc("POST /secrets", func(w http.ResponseWriter, r *http.Request) {
		var s []string
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&s)
		c.mu.Lock()
		c.secrets = append(c.secrets, s...)
		c.mu.Unlock()
	})
	return c
}

func (c *control) handle(pattern string, fn func() error) {
	c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := fn(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (c *control) serve(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: c.mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// runScript runs web/console/e2e/<script> with env, its output going to the test log.
func runScript(t *testing.T, node, dir, script string, env map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "e2e", script))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromiumPath)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// Screenshot paths are not logged (the folder is, once): a failure's own lines then come
	// early enough to survive a CI log cut short, and they are repeated in the failure.
	var last []string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "figure: ") {
			fmt.Println(line)
		}
		if strings.HasPrefix(line, "screenshot ") {
			continue
		}
		t.Log(line)
		if last = append(last, line); len(last) > 40 {
			last = last[1:]
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v; its last lines:\n%s", script, err, strings.Join(last, "\n"))
	}
}

// consoleFleet is maasFleet for a one-member lab: MAAS knows the member m1 (Deployed), a
// Ready machine node-a it discovered, one still New and one Deployed with manual power.
func consoleFleet() sim.Fixture {
	fx := maasFleet()
	fx.Machines[1].Hostname = "m1"
	fx.Machines[1].SystemID = "mmmm01"
	// Twelve machines for the bulk steps, two of them Deployed (commissioning is refused).
	for i := 1; i <= 12; i++ {
		m := sim.MachineSpec{SystemID: fmt.Sprintf("bk%04d", i), Hostname: fmt.Sprintf("bulk-%02d", i), PowerType: "ipmi",
			HardwareUUID: fmt.Sprintf("4c4c4544-0042-3510-8052-b7c04f4b%04d", i)}
		if i == 10 || i == 11 {
			m.Status, m.Owner = 6, "apelora"
		}
		fx.Machines = append(fx.Machines, m)
	}
	return fx
}

func TestConsoleEndToEnd(t *testing.T) {
	parallel(t, lasts(81), browser)
	node, dir := consoleTools(t)
	lab := incuslab.Start(t, 1)
	m := producttest.StartMAAS(t, consoleFleet())
	// The drift watcher runs (every 2 s, and at once after Incus events) for the drift step.
	e := producttest.Start(t, append([]producttest.Option{producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config)}, driftOptions...)...)
	admin := e.Identity("admin", identity.ManageInfrastructure, identity.HardwareDelete)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	host := lab.StartUnjoined(t, "node-4")

	c := newControl()
	c.handle("POST /stop-maas", m.Endpoint.Close)
	c.handle("POST /maas-advance", func() error { m.Clock.Advance(time.Minute); return nil }) // MAAS finishes what it was doing
	c.handle("POST /maas-fault", func() error { m.Server.SetFault(sim.FaultUnavailable); return nil })
	c.handle("POST /maas-ok", func() error { m.Server.SetFault(sim.FaultNone); return nil })
	var bulkRequestID []string
	c.mux.HandleFunc("POST /bulk-request-id", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&bulkRequestID)
	})
	c.handle("POST /joined", func() error { lab.AddMember(host); return nil })
	for path, args := range map[string][]string{
		"POST /hold-node-4":    {"cluster", "set", "node-4", "scheduler.instance=manual"},
		"POST /release-node-4": {"cluster", "unset", "node-4", "scheduler.instance"},
	} {
		c.handle(path, func() error {
			if out, err := lab.CLI(lab.Members[0], args...); err != nil {
				return fmt.Errorf("incus %v: %v: %s", args, err, out)
			}
			return nil
		})
	}
	c.handle("POST /report", func() error {
		r := e.GQL(admin, `{ admissionReport(name: "node-4") { verdict } }`, nil)
		if len(r.Errors) > 0 {
			return fmt.Errorf("%v", r.Errors)
		}
		return nil
	})
	c.handle("POST /revoke-viewer", func() error {
		r := e.GQL(admin, `mutation { revokeIdentity(input: {name: "viewer"}) { identity { name } } }`, nil)
		if len(r.Errors) > 0 {
			return fmt.Errorf("%v", r.Errors)
		}
		return nil
	})
	c.handle("POST /expire-sessions", func() error {
		_, err := e.DB.Store.Pool().Exec(context.Background(),
			`UPDATE console_sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second'`)
		return err
	})
	ctl := c.serve(t)

	hostEnv := map[string]string{}
	for _, kv := range lab.Env(host) {
		k, v, _ := strings.Cut(kv, "=")
		hostEnv[k] = v
	}
	envJSON, _ := json.Marshal(hostEnv)
	// The member-config override the script approves with: the new member's storage pool
	// in a directory of its own.
	source := filepath.Join(t.TempDir(), "node-4-pool")
	if err := os.Mkdir(source, 0o711); err != nil {
		t.Fatal(err)
	}
	shots := shotsDir(t, "end-to-end")
	runScript(t, node, dir, "console.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "VIEWER_TOKEN": viewer, "CONTROL": ctl,
		"SHOTS": shots, "HOST_ADDRESS": host.Address, "HOST_ENV": string(envJSON),
		"SOURCE_DIR": source,
	})
	// The README's picture is the one this run takes: with APELORA_README_SHOT=write
	// (scripts/console-screenshot.sh) the run writes it to docs/; otherwise the committed one
	// must be of its kind, at least its size.
	readme, shot := "../docs/console-fleet.png", filepath.Join(shots, "readme-fleet.png")
	if os.Getenv("APELORA_README_SHOT") == "write" {
		b, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(readme, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", readme)
	} else if got, want := pngSize(t, readme), pngSize(t, shot); got != want {
		t.Errorf("docs/console-fleet.png is %v, the suite's picture %v: run scripts/console-screenshot.sh and commit it", got, want)
	}

	// What the browser was shown once, and the credentials, are nowhere in the server's log
	// or the database.
	logs := e.Logs.String()
	c.mu.Lock()
	secrets := append([]string{admin, viewer}, c.secrets...)
	c.mu.Unlock()
	if len(secrets) < 6 {
		t.Fatalf("the script reported %d secrets, want the join token, the new identity's token and session cookies", len(c.secrets))
	}
	var dump string
	if err := e.DB.Store.Pool().QueryRow(context.Background(), `SELECT
		coalesce((SELECT string_agg(to_jsonb(a)::text, E'\n') FROM audit_events a), '') ||
		coalesce((SELECT string_agg(to_jsonb(s)::text, E'\n') FROM console_sessions s), '') ||
		coalesce((SELECT string_agg(to_jsonb(i)::text, E'\n') FROM identities i), '')`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		if strings.Contains(logs, s) {
			t.Errorf("the server log carries a secret the browser held (%.8s…)", s)
		}
		if strings.Contains(dump, s) {
			t.Errorf("the database carries a secret the browser held (%.8s…)", s)
		}
	}
	// Each step the script took is in the audit trail.
	for _, action := range []string{"registerMachine", "approveEnrolment", "admitMember", "removeMember", "setFenceMapping",
		"setHardwareProfile", "assignHardwareProfile", "createIdentity", "revokeIdentity", "setPlacementGuard"} {
		if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = $1 AND outcome = 'SUCCEEDED' AND actor = 'admin'`, action).(int64); n == 0 {
			t.Errorf("no successful %s by admin in the audit trail", action)
		}
	}
	// The bulk commission's retry: each machine its own event, all under its one request id.
	c.mu.Lock()
	rid := bulkRequestID
	c.mu.Unlock()
	if len(rid) != 1 {
		t.Errorf("the script reported no bulk request id")
	} else if n := e.Scalar(`SELECT count(DISTINCT parameters->'input'->>'systemId') FROM audit_events
		WHERE action = 'commissionMachine' AND outcome = 'SUCCEEDED' AND actor = 'admin' AND request_id = $1`, rid[0]).(int64); n != 9 {
		t.Errorf("%d machines commissioned under the bulk step's request id %s, want 9, each its own event", n, rid[0])
	}
	// Install, single and bulk, each confirmed with the plan it was shown after a pause.
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'installOperatingSystem' AND outcome = 'SUCCEEDED'
		AND actor = 'admin' AND details->>'planHash' IS NOT NULL`).(int64); n != 4 {
		t.Errorf("%d installs confirmed with their plans, want 4 (node-new, bulk-01…03)", n)
	}
	// The approval carried the override; the member joined with it.
	if d := e.Scalar(`SELECT details->>'memberConfig' FROM audit_events WHERE action = 'approveEnrolment' AND outcome = 'SUCCEEDED'`).(string); !strings.Contains(d, source) {
		t.Errorf("the approval's audit event has member config %s, want the override %s", d, source)
	}
}

// TestConsoleScreens shows the console at its extremes: an empty fleet (no Incus, no MAAS),
// and 3,000 MAAS machines, where it measures a filter keystroke to paint and sees a member
// held with incus arrive on the fleet page live.
func TestConsoleScreens(t *testing.T) {
	parallel(t, lasts(12), browser)
	node, dir := consoleTools(t)
	shots := shotsDir(t, "screens")

	empty := producttest.Start(t, producttest.WithoutIncus())
	emptyToken := empty.Identity("admin", identity.ManageInfrastructure)

	fx := sim.Fixture{}
	for i := range 3000 {
		fx.Machines = append(fx.Machines, sim.MachineSpec{
			SystemID: fmt.Sprintf("s%05d", i), Hostname: fmt.Sprintf("node-%04d", i), Status: []int{0, 4, 6, 8, 22}[i%5],
			PowerType: "ipmi", HardwareUUID: fmt.Sprintf("4c4c4544-0042-3510-8052-%012d", i), CPUCount: 16, Memory: 65536,
		})
	}
	m := producttest.StartMAAS(t, fx)
	lab := incuslab.Start(t, 1)
	// An hour between fleet refreshes: the live update below can only come from Incus's event.
	many := producttest.Start(t, producttest.WithMAAS(m.Config), producttest.WithIncus(lab.Config), producttest.WithFleetRefresh(time.Hour))
	manyToken := many.Identity("admin", identity.ManageInfrastructure)
	member := lab.Members[0].Name
	c := newControl()
	c.handle("POST /hold-member", func() error {
		if out, err := lab.CLI(lab.Members[0], "cluster", "set", member, "scheduler.instance=manual"); err != nil {
			return fmt.Errorf("incus cluster set: %v: %s", err, out)
		}
		return nil
	})

	runScript(t, node, dir, "screens.e2e.mjs", map[string]string{
		"EMPTY_BASE": empty.Base, "EMPTY_TOKEN": emptyToken,
		"MANY_BASE": many.Base, "MANY_TOKEN": manyToken, "SHOTS": shots,
		"CONTROL": c.serve(t), "MEMBER": member,
	})
}

// TestConsoleShowsTheCheckpointAndProvesAnEvent: the audit page says "verified up to
// checkpoint N at T" and proves an event on request, checked in Chromium
// (web/console/e2e/auditlog.e2e.mjs).
func TestConsoleShowsTheCheckpointAndProvesAnEvent(t *testing.T) {
	parallel(t, browser)
	node, dir := consoleTools(t)
	shots := shotsDir(t, "auditlog")
	e := producttest.Start(t, func(c *app.Config) { c.AuditCheckpointInterval = 200 * time.Millisecond })
	admin := e.Identity("admin", identity.ManageInfrastructure)
	for i := range 5 {
		register(t, e, admin, fmt.Sprintf("node-%d", i))
	}
	n, err := e.DB.Store.AuditTreeSize(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a checkpoint of every event", func() bool {
		return e.Scalar(`SELECT coalesce(max(tree_size), 0) FROM audit_checkpoints`).(int64) == n
	})
	runScript(t, node, dir, "auditlog.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "SHOTS": shots, "EVENTS": strconv.FormatInt(n, 10),
	})
}

// TestConsoleSaysOnEveryPageThatTheTrailDoesNotVerify: an event deleted from the middle
// of the trail by the database superuser; once the server's check finds it, every page of
// the console shows "The audit trail does not verify since T" with the problem, checked in
// Chromium (web/console/e2e/audittrail.e2e.mjs).
func TestConsoleSaysOnEveryPageThatTheTrailDoesNotVerify(t *testing.T) {
	parallel(t, browser)
	node, dir := consoleTools(t)
	shots := shotsDir(t, "audittrail")
	e := producttest.Start(t, func(c *app.Config) { c.AuditCheckpointInterval = 200 * time.Millisecond })
	admin := e.Identity("admin", identity.ManageInfrastructure)
	for i := range 5 {
		register(t, e, admin, fmt.Sprintf("node-%d", i))
	}
	id := e.Scalar(`SELECT id FROM audit_events ORDER BY id OFFSET 2 LIMIT 1`).(int64)
	if _, err := e.DB.Store.Pool().Exec(t.Context(), fmt.Sprintf(`SET session_replication_role = replica; DELETE FROM audit_events WHERE id = %d; SET session_replication_role = DEFAULT`, id)); err != nil {
		t.Fatal(err)
	}
	var since, problem string
	waitFor(t, "the server to find the deleted event", func() bool {
		st := e.MustGQL(admin, `{ auditTrail { verifies since problem } }`, nil)["auditTrail"].(map[string]any)
		if st["verifies"] == true || st["since"] == nil {
			return false
		}
		since, problem = st["since"].(string), st["problem"].(string)
		return true
	})
	runScript(t, node, dir, "audittrail.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "SHOTS": shots, "SINCE": since, "PROBLEM": "were deleted",
	})
	if !strings.Contains(problem, "were deleted") {
		t.Fatalf("the problem: %s", problem)
	}
}

// TestConsoleShowsMAASHardware: the machine page's MAAS hardware tab lists storage,
// interfaces and script results with unknowns, empty states and the failed script marked,
// checked in Chromium (web/console/e2e/maashardware.e2e.mjs). MAAS only: no Incus needed.
func TestConsoleShowsMAASHardware(t *testing.T) {
	parallel(t, browser)
	node, dir := consoleTools(t)
	fx := maasFleet()
	fx.Machines[0].StorageBytes = 0 // the disks say
	fx.Machines[0].Disks = []sim.DiskSpec{{Name: "nvme0n1", SizeBytes: 3_840_755_982_336, Model: "PM9A3", Serial: "S64GNA0R"}, {Name: "sdb", SizeBytes: 480_103_981_056}}
	fx.Machines[0].Interfaces = []sim.InterfaceSpec{{Name: "ens1f0", LinkSpeed: 25000, Fabric: "fabric-1", VID: 120}, {Name: "ens1f1", InterfaceSpeed: 25000}}
	fx.Machines[0].LastTests = map[string]string{"smartctl-validate": "passed", "stress-ng-cpu-short": "failed"}
	m := producttest.StartMAAS(t, fx)
	e := producttest.Start(t, producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	runScript(t, node, dir, "maashardware.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "SHOTS": shotsDir(t, "maashardware"),
	})
}

// TestConsoleEvacuatesAndRestores evacuates a real member from its machine page and
// restores it: the dialog's plan, the live progress, the phase (web/console/e2e/maintenance.e2e.mjs).
func TestConsoleEvacuatesAndRestores(t *testing.T) {
	parallel(t, lasts(13), browser)
	node, dir := consoleTools(t)
	lab := incuslab.Start(t, 2)
	m0, m1 := lab.Members[0], lab.Members[1]
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	for _, args := range [][]string{
		{"profile", "device", "add", "default", "root", "disk", "path=/", "pool=" + incuslab.Pool},
		{"cluster", "set", m1.Name, "user.apelora.admission", "test"},
		{"init", "--empty", "c1", "-s", incuslab.Pool, "--target", m0.Name},
		{"init", "--empty", "c2", "-s", incuslab.Pool, "--target", m0.Name},
	} {
		if out, err := lab.CLI(m0, args...); err != nil {
			t.Fatalf("incus %v: %v: %s", args, err, out)
		}
	}
	e.MustGQL(admin, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": m0.Name})
	// The other member has no machine record: evacuated with incus, its page still offers
	// Restore (restoreMember needs no record).
	c := newControl()
	c.handle("POST /evacuate-other", func() error {
		// The restore before this brings c1 and c2 back; Incus may still be moving one when
		// its operation is reported done. Evacuate once none is on the other member and no
		// operation runs, so the evacuation has nothing to move.
		deadline := time.Now().Add(60 * time.Second)
		for {
			on, _ := lab.CLI(m0, "list", "-c", "L", "-f", "csv")
			ops, _ := lab.CLI(m0, "operation", "list", "-f", "csv")
			if !strings.Contains(on, m1.Name) && !strings.Contains(ops, "RUNNING") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("instances still on %s or operations running after 60 s: %q %q", m1.Name, on, ops)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if out, err := lab.CLI(m0, "cluster", "evacuate", m1.Name, "--force"); err != nil {
			return fmt.Errorf("incus cluster evacuate %s: %v: %s", m1.Name, err, out)
		}
		return nil
	})
	runScript(t, node, dir, "maintenance.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "SHOTS": shotsDir(t, "maintenance"), "MEMBER": m0.Name, "INSTANCES": "2",
		"OTHER": m1.Name, "CONTROL": c.serve(t),
	})
	for action, want := range map[string]int64{"evacuateMember": 1, "restoreMember": 2} {
		if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = $1 AND outcome = 'SUCCEEDED'`, action).(int64); n != want {
			t.Errorf("%d successful %s in the audit trail, want %d", n, action, want)
		}
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'restoreMember' AND outcome = 'SUCCEEDED' AND machine = $1`, m1.Name).(int64); n != 1 {
		t.Errorf("%d successful restores of %s (no machine record), want 1", n, m1.Name)
	}
}

// consoleHungTimeout is the request timeout of TestConsolePagesWhileMAASHangs: above the
// console's 5 s live refresh, so a page that gave up on a read to ask again (as the
// machine page did, "Loading …" for ever while MAAS hung) never sees the server's answer.
const consoleHungTimeout = 7 * time.Second

// TestConsolePagesWhileMAASHangs opens every page in Chromium while MAAS hangs (maas-sim
// in a process of its own, SIGSTOPped: its port accepts, nothing answers). Each page shows
// what Apelora and Incus know, with MAAS's absence said where MAAS matters (the machine
// page as the fleet does: a banner), and none still says "Loading" once the server's
// request timeout, which the page is told, has passed (web/console/e2e/hungmaas.e2e.mjs).
func TestConsolePagesWhileMAASHangs(t *testing.T) {
	parallel(t, lasts(27), browser)
	node, dir := consoleTools(t)
	lab := incuslab.Start(t, 1)
	caFile := filepath.Join(t.TempDir(), "maas.pem")
	simp := startSimProcess(t, caFile)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(simp.config(caFile)),
		producttest.WithRequestTimeout(consoleHungTimeout))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.MustGQL(admin, `mutation { registerMachine(input: {name: "node-a", provisioner: MAAS, maasSystemId: "aaaa01"}) { machine { name } } }`, nil)
	e.MustGQL(admin, `mutation { setHardwareProfile(input: {profile: "lab", architecture: "x86_64", minCpuCores: 1}) { profile { name } } }`, nil)
	e.MustGQL(admin, `mutation { assignHardwareProfile(input: {machine: "node-a", profile: "lab"}) { machine { name } } }`, nil)
	simp.signal(syscall.SIGSTOP)
	runScript(t, node, dir, "hungmaas.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "SHOTS": shotsDir(t, "maas-hung"), "MEMBER": lab.Members[0].Name,
		"TIMEOUT_MS": strconv.FormatInt(consoleHungTimeout.Milliseconds(), 10),
	})
	simp.signal(syscall.SIGCONT)
}

// TestConsoleAdmitsTheFoundingMember is run.sh's cluster in Chromium: one member, m1, with
// no machine record, the placement guard on, so every instance is refused until a member
// is admitted. The Enrolment page and m1's page offer Admit; its dialog registers m1 and
// then admits it, two steps each planned, read (a human pause) and confirmed, each its own
// audit event; then an untargeted instance lands on m1 (web/console/e2e/admit.e2e.mjs).
func TestConsoleAdmitsTheFoundingMember(t *testing.T) {
	parallel(t, browser)
	node, dir := consoleTools(t)
	lab := incuslab.Start(t, 1)
	first := lab.Members[0]
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	if out, err := lab.CLI(first, "profile", "device", "add", "default", "root", "disk", "path=/", "pool="+incuslab.Pool); err != nil {
		t.Fatalf("root disk: %v: %s", err, out)
	}
	e.MustGQL(admin, `mutation { setPlacementGuard(input: {enabled: true}) { placementGuard { state } } }`, nil)

	c := newControl()
	// POST /launch creates an untargeted empty instance and answers where it landed, or
	// Incus's refusal (200 either way: the script judges).
	n := 0
	c.mux.HandleFunc("POST /launch", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		n++
		name := fmt.Sprintf("c%d", n)
		c.mu.Unlock()
		res := map[string]string{"name": name}
		if out, err := lab.CLI(first, "init", "--empty", name, "-s", incuslab.Pool); err != nil {
			res["error"] = err.Error() + ": " + out
		} else if loc, err := lab.CLI(first, "list", "^"+name+"$", "-c", "L", "-f", "csv"); err == nil {
			res["location"] = strings.TrimSpace(loc)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	})
	runScript(t, node, dir, "admit.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": admin, "SHOTS": shotsDir(t, "admit-founding-member"), "CONTROL": c.serve(t), "MEMBER": first.Name,
	})
	// Two steps, each its own audit event, each confirmed with the plan it was shown.
	for _, action := range []string{"registerMachine", "admitMember"} {
		if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = $1 AND outcome = 'SUCCEEDED' AND actor = 'admin'
			AND details->>'planHash' IS NOT NULL`, action).(int64); n != 1 {
			t.Errorf("%d successful %s by admin confirmed with its plan, want 1", n, action)
		}
	}
}

// name63 is a name of the longest length the server accepts (63), made of prefix.
func name63(prefix string) string {
	s := prefix
	for len(s) < 63 {
		s += "-rack42-row7"
	}
	s = s[:63]
	if strings.HasSuffix(s, "-") {
		s = s[:62] + "x"
	}
	return s
}

// text1024 is a description of the longest length the server accepts (1,024 characters),
// as administrators write them: words, then a long URL with no space to break at.
func text1024(what string) string {
	s := what + ": bought 2026 for the compute tier, warranty until 2031, spare parts on shelf B; serial numbers and the rack diagram are at "
	s += "https://inventory.example.com/assets/rack42/row7/"
	for len(s) < 1024 {
		s += "0123456789abcdef"
	}
	return s[:1024]
}

// TestConsoleLayoutHoldsRealText shows every page at 1280×800 with the longest values the
// server accepts: 63-character machine, member, MAAS host, profile and identity names,
// 1,024-character descriptions, a long maintenance message with a URL, a 5,000-character
// audit value. Each page must not be wider than the window (document scrollWidth ≤
// clientWidth), nothing may be clipped inside a scrolling box, and every action button
// must be on screen (web/console/e2e/layout.e2e.mjs).
func TestConsoleLayoutHoldsRealText(t *testing.T) {
	parallel(t, browser)
	node, dir := consoleTools(t)
	lab := incuslab.Start(t, 1)
	longMember := lab.StartUnjoined(t, name63("member"))
	lab.Join(t, longMember)

	mdisc, mreg, mmem := name63("maas-discovered"), name63("maas-registered"), longMember.Name
	fx := sim.Fixture{Machines: []sim.MachineSpec{
		{SystemID: "ll0001", Hostname: mdisc, Status: 4, PowerType: "ipmi", HardwareUUID: "4c4c4544-0042-3510-8052-b7c04f4e1001", CPUCount: 64, Memory: 524288,
			Zone: name63("zone"), Pool: name63("pool"), Tags: []string{name63("tag-a"), name63("tag-b"), name63("tag-c")}, Description: text1024("MAAS")},
		{SystemID: "ll0002", Hostname: mreg, Status: 4, PowerType: "ipmi", HardwareUUID: "4c4c4544-0042-3510-8052-b7c04f4e1002", CPUCount: 64, Memory: 524288,
			Zone: name63("zone"), Pool: name63("pool"), Tags: []string{name63("tag-a"), name63("tag-b")}},
		{SystemID: "ll0003", Hostname: mmem, Status: 6, Owner: "apelora", PowerType: "ipmi", HardwareUUID: "4c4c4544-0042-3510-8052-b7c04f4e1003", CPUCount: 64, Memory: 524288,
			OSystem: "ubuntu", DistroSeries: "noble"},
	}}
	m := producttest.StartMAAS(t, fx)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	operator := name63("operator")
	token := e.Identity(operator, identity.ManageInfrastructure, identity.HardwareDelete)
	viewerName := name63("viewer")
	viewer := e.Identity(viewerName, identity.ViewInfrastructure)
	must := func(q string, vars map[string]any) { t.Helper(); e.MustGQL(token, q, vars) }
	register := `mutation($in: RegisterMachineInput!) { registerMachine(input: $in) { machine { name } } }`

	manual := []string{name63("manual-a"), name63("manual-b"), name63("manual-c")}
	for _, n := range manual {
		must(register, map[string]any{"in": map[string]any{"name": n, "provisioner": "MANUAL", "description": text1024(n)}})
	}
	must(register, map[string]any{"in": map[string]any{"name": mreg, "provisioner": "MAAS", "maasSystemId": "ll0002", "description": text1024(mreg)}})
	must(register, map[string]any{"in": map[string]any{"name": mmem, "provisioner": "MANUAL", "description": text1024(mmem)}})
	// A pending join token (its token is not kept).
	must(`mutation($n: String!) { approveEnrolment(input: {name: $n}) { expiresAt } }`, map[string]any{"n": manual[1]})
	profile := name63("profile")
	must(`mutation($p: String!, $d: String!) { setHardwareProfile(input: {profile: $p, description: $d, architecture: "x86_64", minCpuCores: 16, minMemoryMiB: 65536}) { profile { name } } }`,
		map[string]any{"p": profile, "d": text1024(profile)})
	must(`mutation($m: String!, $p: String!) { assignHardwareProfile(input: {machine: $m, profile: $p}) { machine { name } } }`, map[string]any{"m": mreg, "p": profile})
	must(`mutation($m: String!) { setFenceMapping(input: {member: $m, maasSystemId: "ll0003", hardwareUuid: "4c4c4544-0042-3510-8052-b7c04f4e1003"}) { mapping { member } } }`,
		map[string]any{"m": mmem})
	must(`mutation($m: String!) { startRollingReboot(input: {members: [$m]}) { rollingReboot { id } } }`, map[string]any{"m": mmem})
	// A maintenance task that failed with a long message, as the follower records
	// Incus's error (an URL with no space to break at).
	long := "Failed to migrate instance " + name63("instance") + " to " + lab.Members[0].Name + ": Error transferring instance data: " +
		"websocket: bad handshake from https://" + lab.Members[0].Address + "/1.0/operations/" + strings.Repeat("5f1c0e7a-3b2d-4c4e-9a8b-", 20) + "/websocket?secret=elided"
	var opID int64
	if err := e.DB.Store.Pool().QueryRow(t.Context(), `INSERT INTO member_operations (machine, action, mode, incus_operation, started_by, finished_at, outcome, message)
		VALUES ($1, 'evacuate', 'live-migrate', '5f1c0e7a-3b2d-4c4e-9a8b-7d6e5f4a3b2c', $2, now(), 'FAILED', $3) RETURNING id`, mmem, operator, long).Scan(&opID); err != nil {
		t.Fatal(err)
	}
	for _, ev := range [][2]string{{"STARTED", "evacuate of " + mmem + " started (Incus operation 5f1c0e7a-3b2d-4c4e-9a8b-7d6e5f4a3b2c)"}, {"FAILED", long}} {
		if _, err := e.DB.Store.Pool().Exec(t.Context(), `INSERT INTO member_operation_events (operation_id, machine, kind, message) VALUES ($1, $2, $3, $4)`, opID, mmem, ev[0], ev[1]); err != nil {
			t.Fatal(err)
		}
	}
	runScript(t, node, dir, "layout.e2e.mjs", map[string]string{
		"BASE": e.Base, "ADMIN_TOKEN": token, "VIEWER_TOKEN": viewer, "SHOTS": shotsDir(t, "layout"),
		"MEMBER": mmem, "REGISTERED": mreg, "DISCOVERED": mdisc, "MANUAL": strings.Join(manual, ","), "PROFILE": profile,
		"OPERATOR": operator, "VIEWER": viewerName,
	})
}

// pngSize is a PNG file's width and height.
func pngSize(t *testing.T, path string) [2]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return [2]int{c.Width, c.Height}
}
