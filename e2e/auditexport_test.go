package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/auditexport"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/producttest"
)

// rsyslogRoot is where scripts/install-deps.sh unpacks Debian's rsyslog and rsyslog-gnutls
// (not installed as the machine's syslog daemon); a system install is used otherwise.
const rsyslogRoot = "/usr/local/lib/apelora-rsyslog"

// rsyslogd finds rsyslogd and its module folder, skipping loudly when there is none
// (failing under CI=true).
func rsyslogd(t *testing.T) (bin, modules string) {
	t.Helper()
	for _, root := range []string{rsyslogRoot, "/"} {
		bin := filepath.Join(root, "usr/sbin/rsyslogd")
		mods, _ := filepath.Glob(filepath.Join(root, "usr/lib/*/rsyslog/imtcp.so"))
		if _, err := os.Stat(bin); err == nil && len(mods) > 0 {
			return bin, filepath.Dir(mods[0])
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("rsyslogd is missing: run scripts/install-deps.sh")
	}
	t.Skip("SKIPPED: rsyslogd is missing (scripts/install-deps.sh unpacks it into " + rsyslogRoot + ")")
	return "", ""
}

// rsyslog is a test-owned rsyslogd: its own config, imtcp on a loopback port, writing the
// audit messages it receives to a file in the test's folder.
type rsyslog struct {
	t         *testing.T
	bin, mods string
	dir, conf string
	addr      string
	out       string // the file it writes
	cmd       *exec.Cmd
	done      chan struct{}
	log       bytes.Buffer
}

// tlsFiles are the CA, certificate and key a receiver over TLS serves.
type tlsFiles struct{ ca, cert, key string }

func startRsyslog(t *testing.T, tlsf *tlsFiles) *rsyslog {
	t.Helper()
	bin, mods := rsyslogd(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	r := &rsyslog{t: t, bin: bin, mods: mods, dir: dir, conf: filepath.Join(dir, "rsyslog.conf"), addr: addr, out: filepath.Join(dir, "audit.log")}
	global := fmt.Sprintf(`global(workDirectory=%q maxMessageSize="256k"`, dir)
	imtcp := `module(load="imtcp")`
	if tlsf != nil {
		global += fmt.Sprintf(` defaultNetstreamDriver="gtls" defaultNetstreamDriverCAFile=%q defaultNetstreamDriverCertFile=%q defaultNetstreamDriverKeyFile=%q`,
			tlsf.ca, tlsf.cert, tlsf.key)
		imtcp = `module(load="imtcp" streamDriver.name="gtls" streamDriver.mode="1" streamDriver.authMode="anon")`
	}
	conf := global + ")\n" + imtcp + "\n" +
		fmt.Sprintf(`input(type="imtcp" address="127.0.0.1" port=%q)`, port) + "\n" +
		// Only Apelora's messages: rsyslogd's own (start, stop) go nowhere.
		fmt.Sprintf(`if $app-name == "apelora" then action(type="omfile" file=%q template="RSYSLOG_SyslogProtocol23Format")`, r.out) + "\n"
	if err := os.WriteFile(r.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *rsyslog) start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin, "-n", "-f", r.conf, "-i", filepath.Join(r.dir, "rsyslogd.pid"), "-M", r.mods)
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	waitFor(r.t, "rsyslogd to listen on "+r.addr, func() bool {
		select {
		case <-r.done:
			r.t.Fatalf("rsyslogd exited: %s", r.log.String())
		default:
		}
		c, err := net.DialTimeout("tcp", r.addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// stop stops rsyslogd as its service would (SIGTERM), and waits for it to exit.
func (r *rsyslog) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
}

// leaves reads the leaf index of every line of an export file, in order.
func leaves(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, auditexport.MaxLine)
	for sc.Scan() {
		line := sc.Bytes()
		i := bytes.IndexByte(line, '{')
		if i < 0 {
			t.Fatalf("%s: a line with no JSON: %q", path, line)
		}
		var l auditexport.Line
		if err := json.Unmarshal(line[i:], &l); err != nil {
			t.Fatalf("%s: %v: %q", path, err, line)
		}
		if auditexport.IsEvent(line[i:]) { // not a checkpoint on its own
			out = append(out, l.LeafIndex)
		}
	}
	return out
}

// exactlyOnceInOrder fails unless got is 0, 1, … n-1.
func exactlyOnceInOrder(t *testing.T, what string, got []int64, n int64) {
	t.Helper()
	if int64(len(got)) != n {
		t.Fatalf("%s holds %d events, want %d: %v", what, len(got), n, got)
	}
	for i, x := range got {
		if x != int64(i) {
			t.Fatalf("%s: line %d is leaf %d, want %d (each event once, in order): %v", what, i+1, x, i, got)
		}
	}
}

// verifyExportFile waits for an export to verify up to a checkpoint of n events (the
// checkpoint may come on a line of its own after the events) and returns the report.
func verifyExportFile(t *testing.T, path string, vkey string, n int64) auditexport.ExportReport {
	t.Helper()
	v, err := auditlog.ParseVerifierKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	var rep auditexport.ExportReport
	waitFor(t, fmt.Sprintf("%s to verify up to a checkpoint of %d events", path, n), func() bool {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if rep, err = auditexport.VerifyExport(f, v); err != nil {
			t.Fatal(err)
		}
		if rep.Problem != nil || rep.Events != n || rep.Duplicates != 0 {
			t.Fatalf("%s does not verify as %d events once each: %+v %v", path, n, rep, rep.Problem)
		}
		return rep.Verified == n
	})
	return rep
}

type exportEnv struct {
	*producttest.Env
	t *testing.T
}

// treeSize is the tree's size as the product reads it (checkpoints, the export's lag).
func (e exportEnv) treeSize() int64 {
	n, err := e.DB.Store.AuditTreeSize(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e exportEnv) acked(sink string) int64 {
	return e.Scalar(`SELECT coalesce((SELECT next_leaf FROM audit_export_progress WHERE sink = $1), 0)`, sink).(int64)
}

func (e exportEnv) waitAcked(sink string, n int64) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("%s to acknowledge %d events", sink, n), func() bool { return e.acked(sink) >= n })
}

// waitCheckpoint waits for a checkpoint of the whole trail and returns its verifier key.
func (e exportEnv) waitCheckpoint(token string, n int64) string {
	e.t.Helper()
	var vkey string
	waitFor(e.t, fmt.Sprintf("a checkpoint of %d events", n), func() bool {
		d := e.MustGQL(token, `{ auditCheckpoint { treeSize verifierKey } }`, nil)
		cp, _ := d["auditCheckpoint"].(map[string]any)
		if cp == nil {
			return false
		}
		vkey, _ = cp["verifierKey"].(string)
		size, _ := cp["treeSize"].(float64)
		return int64(size) >= n
	})
	return vkey
}

// waitLines waits for a file to hold n lines (rsyslog writes after it received).
func waitLines(t *testing.T, path string, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s to hold %d lines", path, n), func() bool { return int64(len(leaves(t, path))) >= n })
}

// The ask of issue 19: rsyslog (Debian's) stopped while 100 mutations run, started again:
// all 100 arrive exactly once, in order, after the event before them, and the chain the
// receiver wrote verifies against the signed checkpoints with the public key alone. The
// other sink (JSON Lines) takes every event meanwhile: a sink that is down holds up neither
// the mutations nor the other sink.
func TestAuditExportSurvivesASyslogOutage(t *testing.T) {
	parallel(t)
	rs := startRsyslog(t, nil)
	jsonl := filepath.Join(t.TempDir(), "audit.jsonl")
	env := producttest.Start(t, func(c *app.Config) {
		c.AuditExport = app.AuditExport{SyslogAddr: rs.addr, JSONLFile: jsonl, Interval: 50 * time.Millisecond}
		c.AuditCheckpointInterval = 200 * time.Millisecond
	})
	e := exportEnv{env, t}
	syslogSink, fileSink := "syslog tcp://"+rs.addr, "jsonl "+jsonl
	admin := e.Identity("admin", identity.ManageInfrastructure)

	// 100 mutations: the first 30 delivered as they happen, then rsyslog stopped (between
	// two mutations, once the 30 were acknowledged) for the other 70.
	start := e.treeSize() // the identity's own event
	for i := range 30 {
		register(t, e.Env, admin, fmt.Sprintf("node-%d", i))
	}
	before := e.treeSize()
	e.waitAcked(syslogSink, before)
	waitLines(t, rs.out, before)

	rs.stop()
	began := time.Now()
	for i := 30; i < 100; i++ {
		register(t, e.Env, admin, fmt.Sprintf("node-%d", i))
	}
	took := time.Since(began)
	total := e.treeSize()
	if total != start+100 {
		t.Fatalf("the trail grew by %d events during 100 mutations", total-start)
	}
	e.waitAcked(fileSink, total)
	if got := e.acked(syslogSink); got != before {
		t.Fatalf("with rsyslog stopped, the syslog sink's position moved from %d to %d", before, got)
	}
	vkey := e.waitCheckpoint(admin, total)
	t.Logf("70 mutations with rsyslog stopped: %v (%.0f/s); the JSON Lines sink kept up", took.Round(time.Millisecond), 70/took.Seconds())

	restarted := time.Now()
	rs.start()
	e.waitAcked(syslogSink, total)
	t.Logf("rsyslog started again: %d events behind, all acknowledged %v later", total-before, time.Since(restarted).Round(time.Millisecond))
	waitLines(t, rs.out, total)
	rep := verifyExportFile(t, rs.out, vkey, total)
	verifyExportFile(t, jsonl, vkey, total)
	rs.stop()
	exactlyOnceInOrder(t, "rsyslog's file", leaves(t, rs.out), total)
	exactlyOnceInOrder(t, "the JSON Lines file", leaves(t, jsonl), total)
	t.Logf("rsyslog's file verifies: %d events, up to checkpoint %d (%d checkpoints)", rep.Events, rep.Verified, rep.Checkpoints)

	// Throughput: a burst of events recorded while rsyslog is down (the JSON Lines sink
	// follows them live), then rsyslog started: how fast the syslog sink catches up.
	const burst = 3000
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range burst / 4 {
				if err := e.DB.Store.RecordAudit(context.Background(), audit.Event{Actor: "bench", Action: "registerMachine",
					Machine: "burst-" + strconv.Itoa(w) + "-" + strconv.Itoa(i), Outcome: audit.Succeeded, RequestID: "burst",
					Parameters: map[string]any{"name": "burst"}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	recorded := time.Now()
	behind := e.treeSize()
	e.waitAcked(fileSink, behind)
	t.Logf("JSON Lines sink: the last of %d events recorded by 4 writers acknowledged %v after it was recorded", burst, time.Since(recorded).Round(time.Millisecond))
	rs.start()
	var moved time.Time
	from := e.acked(syslogSink)
	waitFor(t, "the syslog sink to catch up", func() bool {
		n := e.acked(syslogSink)
		if n > from && moved.IsZero() {
			moved, from = time.Now(), n
		}
		return n >= behind
	})
	t.Logf("syslog sink after rsyslog came back: %d events in %v after its first batch (%.0f events/s)",
		behind-from, time.Since(moved).Round(time.Millisecond), float64(behind-from)/time.Since(moved).Seconds())
	waitLines(t, rs.out, behind)
	rs.stop()
	exactlyOnceInOrder(t, "rsyslog's file after the burst", leaves(t, rs.out), behind)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 60 s for %s", what)
		}
	}
}

// writeTestCA makes a CA and a certificate for localhost and 127.0.0.1 signed by it, as
// PEM files in dir.
func writeTestCA(t *testing.T, dir string) tlsFiles {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "apelora test syslog CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := tlsFiles{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem")}
	for path, block := range map[string]*pem.Block{f.ca: {Type: "CERTIFICATE", Bytes: caDER}, f.cert: {Type: "CERTIFICATE", Bytes: der},
		f.key: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// Over TLS, to rsyslog's gtls driver with a test CA: the receiver's certificate is checked
// against APELORA_AUDIT_SYSLOG_TLS_CA, the events arrive once, in order, and verify; a
// server whose certificate the CA did not sign gets nothing and nothing is acknowledged.
func TestAuditExportOverTLSToRsyslog(t *testing.T) {
	parallel(t)
	if _, mods := rsyslogd(t); mods != "" {
		if _, err := os.Stat(filepath.Join(mods, "lmnsd_gtls.so")); err != nil {
			t.Skip("SKIPPED: rsyslog's gtls driver (rsyslog-gnutls) is missing")
		}
	}
	files := writeTestCA(t, t.TempDir())
	rs := startRsyslog(t, &files)
	other := writeTestCA(t, t.TempDir()) // a CA that signed nothing rsyslog serves
	env := producttest.Start(t, func(c *app.Config) {
		c.AuditExport = app.AuditExport{SyslogAddr: rs.addr, SyslogTLS: true, SyslogCA: files.ca, SyslogServerName: "localhost", Interval: 50 * time.Millisecond}
		c.AuditCheckpointInterval = 200 * time.Millisecond
	})
	e := exportEnv{env, t}
	admin := e.Identity("admin", identity.ManageInfrastructure)
	for i := range 20 {
		register(t, e.Env, admin, fmt.Sprintf("tls-%d", i))
	}
	// Refused names the trail keeps (bounded, escaped): what rsyslog writes must still give
	// each leaf hash byte for byte.
	for _, name := range []string{"é😀 \u2028 <&> \"q\" \\ \t end", "nul\x00byte", strings.Repeat("long-", 2000), "bad\xffutf8"} {
		e.GQL(admin, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": name})
	}
	n := e.treeSize()
	vkey := e.waitCheckpoint(admin, n)
	e.waitAcked("syslog tls://"+rs.addr, n)
	waitLines(t, rs.out, n)
	verifyExportFile(t, rs.out, vkey, n)
	rs.stop()
	exactlyOnceInOrder(t, "rsyslog's file (TLS)", leaves(t, rs.out), n)

	// The same receiver checked against another CA (another product, its own database):
	// refused, so never acknowledged.
	rs.start()
	refused := exportEnv{producttest.Start(t, func(c *app.Config) {
		c.AuditExport = app.AuditExport{SyslogAddr: rs.addr, SyslogTLS: true, SyslogCA: other.ca, Interval: 50 * time.Millisecond}
	}), t}
	register(t, refused.Env, refused.Identity("admin", identity.ManageInfrastructure), "refused-1")
	waitFor(t, "the exporter to refuse the receiver's certificate", func() bool {
		return bytes.Contains([]byte(refused.Logs.String()), []byte("certificate signed by unknown authority"))
	})
	if got := refused.acked("syslog tls://" + rs.addr); got != 0 {
		t.Fatalf("a receiver whose certificate does not verify moved the position to %d", got)
	}
}

// Two API replicas configured with the same sink: one exports, the other stands by, so
// the events both record reach the file once each, in order.
func TestAuditExportHasOneExporterPerSinkAcrossReplicas(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "audit.jsonl")
	export := func(c *app.Config) {
		c.AuditExport = app.AuditExport{JSONLFile: jsonl, Interval: 20 * time.Millisecond}
		c.AuditCheckpointInterval = 200 * time.Millisecond
		c.AuditKeyFile = filepath.Join(dir, "audit-signing.key") // every replica signs with the same key
	}
	a := producttest.Start(t, export)
	otherStore, err := postgres.Open(context.Background(), a.DB.URL, producttest.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(otherStore.Close)
	b := producttest.StartOn(t, a.DB, otherStore, export)
	admin := a.Identity("admin", identity.ManageInfrastructure)
	var wg sync.WaitGroup
	for r, env := range []*producttest.Env{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				env.GQL(admin, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`,
					map[string]any{"n": fmt.Sprintf("r%d-node-%d", r, i)})
			}
		}()
	}
	wg.Wait()
	e := exportEnv{a, t}
	n := e.treeSize()
	vkey := e.waitCheckpoint(admin, n)
	e.waitAcked("jsonl "+jsonl, n)
	verifyExportFile(t, jsonl, vkey, n)
	exactlyOnceInOrder(t, "the file both replicas could write", leaves(t, jsonl), n)
	// The export carries signed checkpoints, never the key that signs them.
	key, err := os.ReadFile(filepath.Join(dir, "audit-signing.key"))
	if err != nil {
		t.Fatal(err)
	}
	exported, _ := os.ReadFile(jsonl)
	// PRIVATE+KEY+name+hash+base64(key): the base64 is the secret.
	parts := bytes.SplitN(bytes.TrimSpace(key), []byte("+"), 5)
	if len(parts) != 5 || len(parts[4]) < 40 || bytes.Contains(exported, parts[4]) {
		t.Fatal("the audit signing key is in the export (or the key file is not what this test expects)")
	}
}
