package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// The bound the tests set (APELORA_REQUEST_TIMEOUT). Before the policy a hung MAAS held
// registerMachine 90 s (3 × 30 s) and a hung Incus 30 s. The tests show that this bound is
// the one that ends the wait, without timing it (a loaded machine may add seconds): the
// answer names it ("did not answer within 2s") and comes while the upstream is still hung.
// How long each answer took is logged.
const testRequestTimeout = 2 * time.Second

// simProcess is cmd/maas-sim in a process of its own, over HTTPS with a self-signed leaf,
// so it can be hung (SIGSTOP) and restarted with a new certificate like a real MAAS.
type simProcess struct {
	t       *testing.T
	dir     string
	keyFile string
	fixture string
	addr    string // 127.0.0.1:port, kept across restarts
	baseURL string
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool
}

const waitsFixture = `{"machines": [
 {"system_id": "aaaa01", "hostname": "node-a", "status": 4, "power_type": "ipmi",
  "hardware_uuid": "4c4c4544-0042-3510-8052-b7c04f4e0a01", "cpu_count": 8, "memory": 32768},
 {"system_id": "bbbb02", "hostname": "node-b", "status": 4, "power_type": "ipmi",
  "hardware_uuid": "4c4c4544-0042-3510-8052-b7c04f4e0b02", "cpu_count": 8, "memory": 32768}]}`

// startSimProcess runs maas-sim on a free loopback port with a new API key; the PEM a
// client must trust is written to certOut.
func startSimProcess(t *testing.T, certOut string) *simProcess {
	t.Helper()
	dir := t.TempDir()
	// A port of its own from the start: a restart reuses it, and one from 127.0.0.1:0 may
	// meanwhile be taken by an outgoing connection (producttest.ListenAddr).
	p := &simProcess{t: t, dir: dir, keyFile: filepath.Join(dir, "key"), fixture: filepath.Join(dir, "fixture.json"), addr: freeAddr(t)}
	if err := os.WriteFile(p.fixture, []byte(waitsFixture), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start(certOut, "-write-key")
	t.Cleanup(p.stop)
	return p
}

func (p *simProcess) start(certOut string, extra ...string) {
	t := p.t
	t.Helper()
	args := append([]string{"-listen", p.addr, "-tls", "leaf", "-cert-out", certOut, "-key-file", p.keyFile, "-fixture", p.fixture}, extra...)
	cmd := exec.Command(buildCommand(t, "github.com/apelora/fabric/cmd/maas-sim"), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr, err := os.OpenFile(filepath.Join(p.dir, "maas-sim.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd, p.done, p.stopped = cmd, make(chan struct{}), false
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("maas-sim said nothing: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout); _ = cmd.Wait(); stderr.Close(); close(p.done) }()
	u := regexp.MustCompile(`https://(127\.0\.0\.1:\d+)/MAAS`).FindStringSubmatch(line)
	if u == nil {
		t.Fatalf("maas-sim: %q", line)
	}
	p.baseURL, p.addr = u[0], u[1]
}

func (p *simProcess) config(caFile string) maas.Config {
	p.t.Helper()
	key, err := os.ReadFile(p.keyFile)
	if err != nil {
		p.t.Fatal(err)
	}
	return maas.Config{BaseURL: p.baseURL, APIKey: strings.TrimSpace(string(key)), CAFile: caFile}
}

func (p *simProcess) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to maas-sim: %v", sig, err)
	}
	if sig == syscall.SIGSTOP {
		if err := incuslab.WaitStopped(p.cmd.Process.Pid, 30*time.Second); err != nil {
			p.t.Fatal(err)
		}
	}
}

// stop ends the process (a stopped one too) and waits for it.
func (p *simProcess) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// timed runs f and says how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func lastAudit(e *producttest.Env, action string) string {
	return fmt.Sprint(e.Scalar(`SELECT outcome || ': ' || coalesce(error, '') FROM audit_events WHERE action = $1 ORDER BY id DESC LIMIT 1`, action))
}

func TestHungMAASAnswersUnavailableWithinTheRequestTimeout(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	caFile := filepath.Join(t.TempDir(), "maas.pem")
	sim := startSimProcess(t, caFile)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(sim.config(caFile)),
		producttest.WithRequestTimeout(testRequestTimeout))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	register := func(name, systemID string) *producttest.Response {
		return e.GQL(admin, `mutation($in: RegisterMachineInput!) { registerMachine(input: $in) { machine { name } } }`,
			map[string]any{"in": map[string]any{"name": name, "provisioner": "MAAS", "maasSystemId": systemID}})
	}
	commission := func() *producttest.Response {
		return e.GQL(admin, `mutation { commissionMachine(input: {systemId: "aaaa01", tests: []}) { maas { systemId status } } }`, nil)
	}
	maasSource := func() map[string]any {
		d := e.MustGQL(admin, `{ fleet { sources { maas { available message } } machines { name warnings { code } } } }`, nil)
		return d["fleet"].(map[string]any)["sources"].(map[string]any)["maas"].(map[string]any)
	}
	if r := register("node-a", "aaaa01"); len(r.Errors) > 0 {
		t.Fatalf("register with MAAS up: %+v", r.Errors)
	}

	sim.signal(syscall.SIGSTOP) // MAAS hangs: its port accepts, nothing answers
	stopped := time.Now()

	var r *producttest.Response
	took := timed(func() { r = register("node-b", "bbbb02") })
	t.Logf("registerMachine(provisioner: MAAS) against a hung MAAS answered in %s", took.Round(time.Millisecond))
	if r.Code() != "UNAVAILABLE" || !strings.Contains(r.Errors[0].Message, "did not answer within 2s") ||
		!strings.Contains(r.Errors[0].Message, "APELORA_REQUEST_TIMEOUT") {
		t.Fatalf("register against a hung MAAS, after %s: %+v", took, r.Errors)
	}
	if n := e.Scalar(`SELECT count(*) FROM machine_records WHERE name = 'node-b'`); n != int64(0) {
		t.Fatalf("a refused registration left %v records", n)
	}

	// A change that has begun runs detached from its client, but each MAAS call in it is
	// still bounded, and its audit event says what happened.
	took = timed(func() { r = commission() })
	t.Logf("commissionMachine against a hung MAAS answered in %s", took.Round(time.Millisecond))
	if r.Code() != "UNAVAILABLE" || !strings.Contains(r.Errors[0].Message, "did not answer within 2s") {
		t.Fatalf("commission against a hung MAAS, after %s: %+v", took, r.Errors)
	}
	if a := lastAudit(e, "commissionMachine"); !strings.HasPrefix(a, "FAILED: ") || !strings.Contains(a, "did not answer") {
		t.Fatalf("audit of the timed-out commission: %s", a)
	}

	var src map[string]any
	took = timed(func() { src = maasSource() })
	// The fleet does not wait out the request timeout for MAAS: it answers with Incus and the
	// records once its patience for MAAS ends, and says MAAS is not answering yet.
	if src["available"] != false || !strings.Contains(src["message"].(string), "MAAS not answering (since ") {
		t.Fatalf("fleet with a hung MAAS, after %s: %v", took, src)
	}
	t.Logf("all of the above in %s with MAAS hung", time.Since(stopped).Round(time.Millisecond))

	sim.signal(syscall.SIGCONT)
	if src := maasSource(); src["available"] != true {
		t.Fatalf("fleet after MAAS resumed: %v", src)
	}
	if r := register("node-b", "bbbb02"); len(r.Errors) > 0 {
		t.Fatalf("register after MAAS resumed: %+v", r.Errors)
	}
	if r := commission(); len(r.Errors) > 0 {
		t.Fatalf("commission after MAAS resumed: %+v", r.Errors)
	}
	checkKeyNowhere(t, e, sim.config(caFile).APIKey)
}

func TestHungIncusAnswersUnavailableWithinTheRequestTimeout(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithRequestTimeout(testRequestTimeout))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	const clusterQuery = `{ cluster { members offlineMembers unmappedMembers healingThreshold warnings { code message } } }`
	if r := e.GQL(admin, `mutation { registerMachine(input: {name: "node-1", provisioner: MANUAL}) { machine { name } } }`, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	cl := e.MustGQL(admin, clusterQuery, nil)["cluster"].(map[string]any)
	if cl["members"] != float64(1) || cl["offlineMembers"] != float64(0) || fmt.Sprint(cl["unmappedMembers"]) != "[m1]" {
		t.Fatalf("cluster with Incus up: %v", cl)
	}

	m1 := lab.Members[0]
	if err := lab.Freeze(m1); err != nil { // the member Apelora talks to hangs
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := lab.Thaw(m1); err != nil {
				t.Error(err)
			}
		}
	}
	defer thaw()

	var r *producttest.Response
	took := timed(func() {
		r = e.GQL(admin, `mutation { approveEnrolment(input: {name: "node-1"}) { joinToken } }`, nil)
	})
	t.Logf("approveEnrolment against a hung Incus answered in %s", took.Round(time.Millisecond))
	if r.Code() != "UNAVAILABLE" || !strings.Contains(r.Errors[0].Message, "Incus did not answer within 2s") ||
		!strings.Contains(r.Errors[0].Message, "APELORA_REQUEST_TIMEOUT") {
		t.Fatalf("approve against a hung Incus, after %s: %+v", took, r.Errors)
	}
	if a := lastAudit(e, "approveEnrolment"); !strings.HasPrefix(a, "FAILED: ") {
		t.Fatalf("audit of the timed-out approval: %s", a)
	}

	// The cluster view says it could not ask: null counts and the reason, never 0.
	took = timed(func() { cl = e.MustGQL(admin, clusterQuery, nil)["cluster"].(map[string]any) })
	if cl["members"] != nil || cl["offlineMembers"] != nil || cl["unmappedMembers"] != nil || cl["healingThreshold"] != nil ||
		!strings.Contains(fmt.Sprint(cl["warnings"]), "INCUS_UNAVAILABLE") || !strings.Contains(fmt.Sprint(cl["warnings"]), "did not answer within 2s") {
		t.Fatalf("cluster with a hung Incus, after %s: %v", took, cl)
	}
	// The fleet too: Incus unavailable, phases UNKNOWN, not "not a member".
	d := e.MustGQL(admin, `{ fleet { sources { incus { available message } } machines { name phase } } }`, nil)
	if src := d["fleet"].(map[string]any)["sources"].(map[string]any)["incus"].(map[string]any); src["available"] != false ||
		!strings.Contains(src["message"].(string), "did not answer within 2s") {
		t.Fatalf("fleet sources with a hung Incus: %v", src)
	}
	if ms := fmt.Sprint(d["fleet"].(map[string]any)["machines"]); ms != "[map[name:node-1 phase:UNKNOWN]]" {
		t.Fatalf("fleet rows with a hung Incus: %s", ms)
	}

	thaw()
	cl = e.MustGQL(admin, clusterQuery, nil)["cluster"].(map[string]any)
	if cl["members"] != float64(1) {
		t.Fatalf("cluster after Incus resumed: %v", cl)
	}
	if r := e.GQL(admin, `mutation { approveEnrolment(input: {name: "node-1"}) { expiresAt } }`, nil); len(r.Errors) > 0 {
		t.Fatalf("approve after Incus resumed: %+v", r.Errors)
	}
}

func TestRotatedMAASCertificateIsTrustedWithoutARestart(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "maas-ca.pem") // what APELORA_MAAS_CA_FILE names
	sim := startSimProcess(t, caFile)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(sim.config(caFile)),
		producttest.WithRequestTimeout(testRequestTimeout))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	maasSource := func() map[string]any {
		d := e.MustGQL(admin, `{ fleet { sources { maas { available message } } } }`, nil)
		return d["fleet"].(map[string]any)["sources"].(map[string]any)["maas"].(map[string]any)
	}
	if src := maasSource(); src["available"] != true {
		t.Fatalf("before the rotation: %v", src)
	}

	// MAAS restarts with a new certificate; the operator has not updated the CA file yet.
	sim.stop()
	rotated := filepath.Join(dir, "rotated.pem")
	sim.start(rotated)
	if src := maasSource(); src["available"] != false || !strings.Contains(src["message"].(string), "certificate is not trusted") ||
		!strings.Contains(src["message"].(string), "APELORA_MAAS_CA_FILE") {
		t.Fatalf("rotated certificate, CA file not yet rewritten: %v", src)
	}
	r := e.GQL(admin, `mutation { registerMachine(input: {name: "node-a", provisioner: MAAS, maasSystemId: "aaaa01"}) { machine { name } } }`, nil)
	if r.Code() != "UNAVAILABLE" || !strings.Contains(r.Errors[0].Message, "certificate is not trusted") {
		t.Fatalf("register with MAAS's certificate untrusted: %+v", r.Errors)
	}

	// The operator installs the new certificate (written aside, then renamed, as tools do).
	pem, err := os.ReadFile(rotated)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile+".new", pem, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(caFile+".new", caFile); err != nil {
		t.Fatal(err)
	}
	if src := maasSource(); src["available"] != true {
		t.Fatalf("after the CA file was rewritten, with no restart: %v", src)
	}
	if r := e.GQL(admin, `mutation { registerMachine(input: {name: "node-a", provisioner: MAAS, maasSystemId: "aaaa01"}) { machine { name } } }`, nil); len(r.Errors) > 0 {
		t.Fatalf("register after the CA file was rewritten: %+v", r.Errors)
	}
	if !strings.Contains(e.Logs.String(), "MAAS CA file changed") {
		t.Fatal("the server did not log that it trusts the new CA file")
	}
	checkKeyNowhere(t, e, sim.config(caFile).APIKey)
}

// checkKeyNowhere: no part of the MAAS key in the server's log or the database.
func checkKeyNowhere(t *testing.T, e *producttest.Env, key string) {
	t.Helper()
	dump := e.DB.Dump(t)
	for _, part := range strings.Split(key, ":") {
		if strings.Contains(e.Logs.String(), part) || strings.Contains(dump, part) {
			t.Fatalf("a part of the MAAS key is in the server log or the database")
		}
	}
}
