package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// fenceWaitLimit bounds every wait for something the cluster or a worker must do; it is a
// guard against hanging, not a timing assertion (Incus alone takes 10–25 s to call a
// stopped member offline).
const fenceWaitLimit = 3 * time.Minute

// fenceSim is the MAAS simulator for fencing tests: one Deployed, IPMI-powered machine per
// member (hostname = member name), owned by the worker's MAAS user, served over HTTPS with
// a CA-signed leaf. Power-offs take effect only when the test advances the fake clock; when
// one does, the member's incusd is killed, so the cluster sees what a real fence does.
type fenceSim struct {
	*sim.Server
	clock    *sim.FakeClock
	ep       *sim.Endpoint
	caFile   string
	apiKey   string // the API's key: an admin that only reads here
	powerKey string // the worker's key: the fencer user that owns the machines
	ids      map[string]string
	uuids    map[string]string
}

func fenceSystemID(member string) string { return "fnc" + member }

func fenceUUID(member string) string {
	return fmt.Sprintf("4c4c4544-0046-4e43-8045-%012x", []byte(member))
}

func startFenceSim(t *testing.T, lab *incuslab.Cluster) *fenceSim {
	return startFenceSimOf(t, fenceLab{"fnc", lab})
}

// fenceLab is a lab whose members the simulator powers, each machine's system id the
// prefix and the member's name: the first lab's prefix is fenceSystemID's ("fnc"), and
// f.ids and f.uuids name its machines.
type fenceLab struct {
	prefix string
	lab    *incuslab.Cluster
}

func fenceLabUUID(prefix, member string) string {
	if prefix == "fnc" {
		return fenceUUID(member)
	}
	return fmt.Sprintf("4c4c4544-0046-4e43-8045-%012x", []byte(prefix[2:]+member))
}

func startFenceSimOf(t *testing.T, labs ...fenceLab) *fenceSim {
	t.Helper()
	f := &fenceSim{clock: sim.NewFakeClock(time.Now()), apiKey: sim.NewAPIKey(), powerKey: sim.NewAPIKey(),
		ids: map[string]string{}, uuids: map[string]string{}}
	var specs []sim.MachineSpec
	for i, l := range labs {
		for _, m := range l.lab.Members {
			id, uuid, host := l.prefix+m.Name, fenceLabUUID(l.prefix, m.Name), m.Name
			if i == 0 {
				f.ids[m.Name], f.uuids[m.Name] = id, uuid
			} else {
				host = l.prefix + "-" + m.Name // MAAS host names are unique
			}
			specs = append(specs, sim.MachineSpec{SystemID: id, Hostname: host, Status: sim.StatusDeployed, PowerType: "ipmi",
				Owner: "fencer", HardwareUUID: uuid, CPUCount: 8, Memory: 32768, OSystem: "ubuntu", DistroSeries: "noble"})
		}
	}
	s, err := sim.New(sim.Options{
		Users:     []sim.User{{Username: "apelora", APIKey: f.apiKey, Admin: true}, {Username: "fencer", APIKey: f.powerKey}},
		Fixture:   sim.Fixture{Machines: specs},
		Clock:     f.clock,
		Durations: sim.Durations{PowerOff: 2 * time.Second},
		OnPowerOff: func(id string) {
			for _, l := range labs {
				if !strings.HasPrefix(id, l.prefix) {
					continue
				}
				m := l.lab.Member(strings.TrimPrefix(id, l.prefix))
				if m != nil && m.Running() {
					if err := l.lab.Kill(m); err != nil {
						t.Errorf("power-off hook: %v", err)
					}
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.listen(t, s)
	return f
}

// listen serves the simulator s over TLS on loopback (closed at the test's end) and writes
// its CA where the API and workers read it.
func (f *fenceSim) listen(t *testing.T, s *sim.Server) {
	t.Helper()
	f.Server = s
	var err error
	if f.ep, err = s.ListenTLS("127.0.0.1:0", sim.TLSCASignedLeaf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.ep.Close() })
	f.caFile = filepath.Join(t.TempDir(), "maas-ca.pem")
	if err := os.WriteFile(f.caFile, f.ep.Certs.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runClock moves the simulator's clock a second every 250 ms until the test ends:
// power-offs take effect when it moves.
func (f *fenceSim) runClock(t *testing.T) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				f.clock.Advance(time.Second)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// apiConfig is what the API replica that has MAAS uses: the read key.
func (f *fenceSim) apiConfig() maas.Config {
	return maas.Config{BaseURL: f.ep.BaseURL, APIKey: f.apiKey, CAFile: f.caFile}
}

// requests counts the requests with this op for a machine.
func (f *fenceSim) requests(member, op string) int {
	n := 0
	path := "/MAAS/api/2.0/machines/" + fenceSystemID(member) + "/"
	for _, r := range f.Requests() {
		if r.Path == path && r.Op == op {
			n++
		}
	}
	return n
}

// fenceEnv is a lab cluster with the product (two API replicas on one database, one with
// MAAS and one without), the MAAS simulator, and apelora-worker processes.
type fenceEnv struct {
	t       *testing.T
	lab     *incuslab.Cluster
	maas    *fenceSim
	db      *pgtest.DB
	api     *producttest.Env // has MAAS (a read key)
	bare    *producttest.Env // another replica, without MAAS
	admin   string
	workers map[string]*workerProc
	limits  map[string]string
	// auditKey is the audit key file the API replicas and the workers share: the workers
	// seal the events they record (rolling reboot steps) with it.
	auditKey string

	mu     sync.Mutex
	events []client.FenceEventFields // as pushed to the websocket subscriber
}

func withFenceMAAS(c maas.Config) producttest.Option { return func(cfg *app.Config) { cfg.MAAS = c } }

// startFenceEnv starts it all on db (nil: a fresh test database); opts go to both API
// replicas.
func startFenceEnv(t *testing.T, members int, db *pgtest.DB, limits map[string]string, opts ...producttest.Option) *fenceEnv {
	lab := incuslab.Start(t, members)
	fs := startFenceSim(t, lab)
	if db == nil {
		db = pgtest.New(t)
	}
	auditKey := filepath.Join(t.TempDir(), auditlog.KeyFile)
	k, _, err := auditlog.LoadOrCreateKey(auditKey)
	if err != nil {
		t.Fatal(err)
	}
	db.Store.SealAuditWith(k.Sealer)
	opts = append([]producttest.Option{func(c *app.Config) { c.AuditKeyFile = auditKey }}, opts...)
	api := producttest.StartOn(t, db, db.Store, append([]producttest.Option{producttest.WithIncus(lab.Config), withFenceMAAS(fs.apiConfig())}, opts...)...)
	other, err := postgres.Open(context.Background(), db.URL, producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	bare := producttest.StartOn(t, db, other, append([]producttest.Option{producttest.WithIncus(lab.Config)}, opts...)...)
	x := &fenceEnv{t: t, lab: lab, maas: fs, db: db, api: api, bare: bare, workers: map[string]*workerProc{}, limits: limits, auditKey: auditKey}
	x.admin = api.Identity("admin", identity.ManageInfrastructure)
	return x
}

func (x *fenceEnv) gql(e *producttest.Env, q string, vars map[string]any) map[string]any {
	x.t.Helper()
	r := e.GQL(x.admin, q, vars)
	if len(r.Errors) > 0 {
		x.t.Fatalf("%s: %+v", q, r.Errors)
	}
	return r.Data
}

// watch subscribes to fenceProgress on the replica without MAAS (after: from) and keeps
// every pushed event.
func (x *fenceEnv) watch(from string) {
	t := x.t
	ws, err := client.NewWebSocket(x.bare.Base+"/graphql", x.admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs, err := ws.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var after *string
	if from != "" {
		after = &from
	}
	ch, _, err := client.FenceProgress(ctx, ws, nil, after)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); ws.Close(); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case err := <-errs:
				if ctx.Err() == nil && err != nil {
					t.Errorf("fenceProgress websocket: %v", err)
				}
				return
			case r, ok := <-ch:
				if !ok {
					return
				}
				if r.Errors != nil {
					t.Errorf("fenceProgress: %v", r.Errors)
					continue
				}
				x.mu.Lock()
				x.events = append(x.events, r.Data.FenceProgress.FenceEventFields)
				x.mu.Unlock()
			}
		}
	}()
}

func describeEvent(e client.FenceEventFields) string {
	s := e.Id + " " + string(e.Kind)
	if e.Member != nil {
		s += " " + *e.Member
	}
	if e.Reason != nil {
		s += "/" + string(*e.Reason)
	}
	return s + " (" + e.Worker + ")"
}

func (x *fenceEnv) pushed() []client.FenceEventFields {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]client.FenceEventFields(nil), x.events...)
}

// await waits for the next pushed event, at or after index from, that matches; it returns
// the event and its index.
func (x *fenceEnv) await(what string, from int, match func(client.FenceEventFields) bool) (client.FenceEventFields, int) {
	x.t.Helper()
	deadline := time.Now().Add(fenceWaitLimit)
	for {
		evs := x.pushed()
		for i := from; i < len(evs); i++ {
			if match(evs[i]) {
				x.t.Logf("pushed: %s: %s", describeEvent(evs[i]), evs[i].Message)
				return evs[i], i
			}
		}
		if time.Now().After(deadline) {
			var got []string
			for _, e := range evs {
				got = append(got, describeEvent(e))
			}
			x.t.Fatalf("no %s pushed; pushed so far:\n%s\n%s", what, strings.Join(got, "\n"), x.workerLogs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fenceEventIs(kind client.FenceEventKind, member string, reason ...client.FenceReason) func(client.FenceEventFields) bool {
	return func(e client.FenceEventFields) bool {
		if e.Kind != kind || (member != "" && (e.Member == nil || *e.Member != member)) {
			return false
		}
		return len(reason) == 0 || (e.Reason != nil && *e.Reason == reason[0])
	}
}

// count counts pushed events matching.
func (x *fenceEnv) count(match func(client.FenceEventFields) bool) int {
	n := 0
	for _, e := range x.pushed() {
		if match(e) {
			n++
		}
	}
	return n
}

// waitFor polls cond (reading the API, Incus or the simulator) until it holds.
func (x *fenceEnv) waitFor(what string, cond func() bool) {
	x.t.Helper()
	deadline := time.Now().Add(fenceWaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			x.t.Fatalf("%s did not happen\n%s", what, x.workerLogs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Commands under test are built once per test run, each into a folder of its own.
var builds sync.Map // package path → *builtCommand

type builtCommand struct {
	once sync.Once
	bin  string
	err  error
}

func buildCommand(t *testing.T, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &builtCommand{})
	b := v.(*builtCommand)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "apelora-e2e-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(dir, filepath.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", b.bin, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// removeBuilds removes what buildCommand built (TestMain, once the tests are done).
func removeBuilds() {
	builds.Range(func(_, v any) bool {
		if b := v.(*builtCommand); b.bin != "" {
			_ = os.RemoveAll(filepath.Dir(b.bin))
		}
		return true
	})
}

func buildWorker(t *testing.T) string {
	return buildCommand(t, "github.com/apelora/fabric/cmd/apelora-worker")
}

// workerProc is one apelora-worker process.
type workerProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startWorker runs an apelora-worker process with the worker's own MAAS key.
func (x *fenceEnv) startWorker(name string, extra ...string) *workerProc {
	t := x.t
	bin := buildWorker(t)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "APELORA_") && !strings.HasPrefix(kv, "INCUS_") {
			env = append(env, kv)
		}
	}
	lc := x.lab.Config
	env = append(env,
		"APELORA_DATABASE_URL="+x.db.URL, "APELORA_STATE_DIR="+t.TempDir(), "APELORA_LOG_LEVEL=debug",
		"APELORA_INCUS_URL="+lc.URL, "APELORA_INCUS_CLIENT_CERT="+lc.ClientCertFile, "APELORA_INCUS_CLIENT_KEY="+lc.ClientKeyFile,
		"APELORA_INCUS_SERVER_CERT="+lc.ServerCertFile,
		"APELORA_MAAS_URL="+x.maas.ep.BaseURL, "APELORA_MAAS_API_KEY="+x.maas.powerKey, "APELORA_MAAS_CA_FILE="+x.maas.caFile,
		"APELORA_WORKER_NAME="+name, "APELORA_AUDIT_KEY_FILE="+x.auditKey)
	for k, v := range x.limits {
		env = append(env, k+"="+v)
	}
	env = append(env, extra...)
	logFile := filepath.Join(t.TempDir(), name+".log")
	out, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{name: name, cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); out.Close(); close(w.done) }()
	t.Cleanup(func() { w.kill(syscall.SIGKILL) })
	x.workers[name] = w
	return w
}

// kill signals the worker and waits for it to exit.
func (w *workerProc) kill(sig syscall.Signal) {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(sig)
	<-w.done
}

func (x *fenceEnv) workerLogs() string {
	var b strings.Builder
	for name, w := range x.workers {
		data, _ := os.ReadFile(w.log)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		fmt.Fprintf(&b, "---- worker %s (last lines) ----\n%s\n", name, strings.Join(lines, "\n"))
	}
	return b.String()
}

func (x *fenceEnv) allLogs() map[string]string {
	out := map[string]string{"api server log": x.api.Logs.String(), "second api server log": x.bare.Logs.String()}
	for name, w := range x.workers {
		data, _ := os.ReadFile(w.log)
		out["worker "+name+" log"] = string(data)
	}
	return out
}

// assertNoMAASKey proves neither MAAS key, nor any part of one, is anywhere in text.
func (x *fenceEnv) assertNoMAASKey(where, text string) {
	x.t.Helper()
	for _, key := range []string{x.maas.powerKey, x.maas.apiKey} {
		for _, part := range append([]string{key}, strings.Split(key, ":")...) {
			if strings.Contains(text, part) {
				x.t.Errorf("the %s contains a MAAS key (or part of one)", where)
			}
		}
	}
}

// machineFence reads the machine's fence and member status through the API.
func (x *fenceEnv) machineFence(member string) (fence map[string]any, status string) {
	d := x.gql(x.api, `query($n: String!) { machine(name: $n) { member { status } fence { maasSystemId hardwareUuid offlineSince
		lastDrill { ok powerState problem } lastEvent { kind reason worker } } } }`, map[string]any{"n": member})
	m, _ := d["machine"].(map[string]any)
	if m == nil {
		return nil, ""
	}
	fence, _ = m["fence"].(map[string]any)
	if mem, ok := m["member"].(map[string]any); ok {
		status, _ = mem["status"].(string)
	}
	return fence, status
}

const setMapping = `mutation($m: String!, $s: String!, $u: String!) { setFenceMapping(input: {member: $m, maasSystemId: $s, hardwareUuid: $u}) {
	mapping { member maasSystemId hardwareUuid setBy } verifiedWithMaas notice machine { name } } }`

func mappingVars(member, systemID, uuid string) map[string]any {
	return map[string]any{"m": member, "s": systemID, "u": uuid}
}
