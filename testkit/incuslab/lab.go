// Package incuslab starts a real Incus cluster on loopback addresses for tests: several
// incusd processes, each with its own INCUS_DIR, on 127.X.Y.1, 127.X.Y.2 … port 8443.
//
//	c := incuslab.Start(t, 3)              // skips loudly without incusd (fails under CI=true)
//	cl := c.Client(t, c.Members[1])        // HTTPS to member 2, pinned cluster cert, client cert
//
// Each lab takes a whole 127.X.Y.0/24 block, chosen at random in 127.100.0.0–127.199.255.0
// and held with an flock on /tmp/apelora-incuslab/127.X.Y.lock for the life of the lab,
// after checking that nothing listens on its addresses, so several `go test` processes (and
// a developer's cmd/incus-lab lab) can run labs at the same time.
//
// Daemons run in their own session (setsid) with a parent-death signal, so they die with
// the test process; t.Cleanup kills them by process group (SIGKILL), waits for them,
// unmounts what incusd mounted under the lab directory (tmpfs on shmounts and guestapi)
// and removes it. Each daemon's log is kept in its directory (incusd.log, stdout.log) and
// printed when the test failed. The parent-death signal is tied to the OS thread that
// started the daemon; Go keeps its threads for the life of the process unless a goroutine
// exits while locked to one (runtime.LockOSThread), which tests using a lab must not do.
//
// Facts worth knowing when writing tests: with three members all three are database
// voters (no stand-by); a fourth member joins as "database-standby". A frozen (SIGSTOP)
// non-voter shows Offline after cluster.offline_threshold (20 s by default), so poll the
// member list, never sleep a fixed time. Do not freeze or kill a majority of voters.
// cmd/incus-lab keeps a lab running for a developer (Options.Keep; Stop, Kept).
package incuslab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/domain/machines"
)

const (
	// Port every member listens on.
	Port = 8443
	// Pool is the name of the dir storage pool every lab cluster has.
	Pool = "local"
	// DefaultIncusd is where Debian's incus-base installs the daemon.
	DefaultIncusd = "/usr/libexec/incus/incusd"

	readyTimeout = 30 * time.Second
	cliTimeout   = 90 * time.Second
	killTimeout  = 30 * time.Second
	// spareHosts is how many addresses past the members are checked free at start, for StartUnjoined.
	spareHosts = 6
	// Marker marks a directory as a kept lab (Options.Keep): Stop removes only such a one.
	Marker = ".apelora-incus-lab"
)

// LockDir holds one lock file per address block (127.X.Y.lock), for tests' labs and kept
// ones alike.
var LockDir = filepath.Join(os.TempDir(), "apelora-incuslab")

// Member is one incusd of a lab.
type Member struct {
	Name    string // cluster member name: m1, m2 …
	Address string // "127.X.Y.i:8443"
	Dir     string // its INCUS_DIR
	PID     int    // incusd's PID (also its process group and session id)

	cmd    *exec.Cmd
	exited chan struct{}
	state  string // "running", "frozen", "stopped"
}

// Socket returns the path of the member's unix socket.
func (m *Member) Socket() string { return filepath.Join(m.Dir, "unix.socket") }

// URL returns https://address.
func (m *Member) URL() string { return "https://" + m.Address }

// LogFile returns the path of the member's incusd log.
func (m *Member) LogFile() string { return filepath.Join(m.Dir, "incusd.log") }

// Host returns the member's IP address without the port.
func (m *Member) Host() string { h, _, _ := net.SplitHostPort(m.Address); return h }

// Cluster is a running lab.
type Cluster struct {
	// Members are the cluster members, m1 first (the bootstrap member, database leader at start).
	Members []*Member
	// Dir holds every member directory, the client certificate and the CLI configuration.
	Dir string
	// ClientCertFile and ClientKeyFile are Apelora's admin identity (ECDSA P-256, PEM),
	// trusted by the cluster.
	ClientCertFile string
	ClientKeyFile  string
	// ClusterCertFile is the cluster certificate (PEM) that clients pin.
	ClusterCertFile string
	// URL of member 1.
	URL string
	// Config reaches member 1 over HTTPS with the pinned cluster certificate and the client
	// certificate; ready for incus.New.
	Config incus.Config
	// Block is the address prefix, e.g. "127.123.45." (members are Block+"1", Block+"2" …).
	Block string
	// StartupTime is how long Start took.
	StartupTime time.Duration

	incusd, cli string
	cliConf     string
	lock        *os.File

	keep    bool   // Options.Keep
	summary string // what Launch started, how fast

	mu      sync.Mutex
	daemons []*Member // every daemon started, members and unjoined
	next    int       // next host number for StartUnjoined
	clients []*incus.Client
}

// TB is what the lab needs of a test (testing.TB has it): the lab imports no package
// testing, so cmd/incus-lab can use it too.
type TB interface {
	Helper()
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
}

// Start starts an n-member cluster and registers its teardown with t.Cleanup. It skips
// the test with a clear message when incusd or the incus CLI is missing or the test does
// not run as root, unless CI=true, where that is a failure.
func Start(t TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("incuslab: need at least one member, got %d", n)
	}
	incusd, cli := Require(t)
	c, err := Launch(Options{Members: n, Incusd: incusd, CLI: cli})
	if c != nil {
		t.Cleanup(func() { c.teardown(t) })
	}
	if err != nil {
		t.Fatalf("incuslab: %v", err)
	}
	t.Logf("incuslab: %s", c.summary)
	return c
}

// Options says what Launch starts.
type Options struct {
	Members int
	// Incusd and CLI are the paths of incusd and the incus CLI (see Require, FindTools).
	Incusd, CLI string
	// Dir holds the lab; "" makes a temporary one. Block is the address prefix to use
	// ("127.42.0."); "" picks a free random one.
	Dir, Block string
	// Keep makes a lab that outlives this process (cmd/incus-lab): its daemons have no
	// parent-death signal and inherit the block's lock, and the lab writes its state
	// (each member's pid and address, the marker, env) for Stop and Status.
	Keep bool
	// Identity is the client identity the lab trusts (another lab's, so one identity
	// reaches several clusters as Apelora's does); nil: the lab makes its own.
	Identity *ClientIdentity
	// Untrusted: the lab trusts no client certificate (its identity, made or given, is
	// not added to the trust store): a cluster that does not trust Apelora yet.
	Untrusted bool
}

// ClientIdentity is a client certificate and its key (PEM files): Apelora's Incus
// identity, which a lab trusts.
type ClientIdentity struct {
	CertFile, KeyFile string
}

// NewIdentity writes a new client identity (ECDSA P-256, PEM) into dir.
func NewIdentity(dir string) (*ClientIdentity, error) {
	id := &ClientIdentity{CertFile: filepath.Join(dir, "client.crt"), KeyFile: filepath.Join(dir, "client.key")}
	return id, writeIdentity(id)
}

// StartWith is Start with Options (Members, Identity, Untrusted; the tools are found as
// Start finds them): a lab that trusts a given identity, or none.
func StartWith(t TB, o Options) *Cluster {
	t.Helper()
	if o.Members < 1 {
		t.Fatalf("incuslab: need at least one member, got %d", o.Members)
	}
	o.Incusd, o.CLI = Require(t)
	c, err := Launch(o)
	if c != nil {
		t.Cleanup(func() { c.teardown(t) })
	}
	if err != nil {
		t.Fatalf("incuslab: %v", err)
	}
	t.Logf("incuslab: %s", c.summary)
	return c
}

// Identity is the client identity the lab trusts (or, untrusted, the one it made or was
// given).
func (c *Cluster) Identity() *ClientIdentity {
	return &ClientIdentity{CertFile: c.ClientCertFile, KeyFile: c.ClientKeyFile}
}

// Trust has the lab trust id (over member 1's unix socket).
func (c *Cluster) Trust(id *ClientIdentity) error { return c.trustCertFile(c.Members[0], id.CertFile) }

// ClusterCertificatePEM is the cluster certificate every member presents (PEM).
func (c *Cluster) ClusterCertificatePEM() string {
	b, _ := os.ReadFile(c.ClusterCertFile)
	return string(b)
}

// Launch starts a cluster as Options say. On an error it returns the part that started
// (nil if nothing did): Close it.
func Launch(o Options) (*Cluster, error) {
	if o.Members < 1 {
		return nil, fmt.Errorf("need at least one member, got %d", o.Members)
	}
	began := time.Now()
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "incuslab-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, incusd: o.Incusd, cli: o.CLI, cliConf: filepath.Join(dir, "cli"), keep: o.Keep}
	if err := os.MkdirAll(c.cliConf, 0o700); err != nil {
		return c, err
	}
	if o.Keep {
		if err := os.WriteFile(filepath.Join(dir, Marker), nil, 0o644); err != nil {
			return c, err
		}
	}
	var err error
	if o.Block == "" {
		c.Block, c.lock, err = ReserveBlock(o.Members + spareHosts)
	} else {
		c.Block, c.lock, err = reserve(o.Block, o.Members)
	}
	if err != nil {
		return c, err
	}
	c.next = o.Members + 1

	// Start every daemon at once; they are independent until clustered.
	n := o.Members
	ms := make([]*Member, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ms[i], errs[i] = c.startDaemon(fmt.Sprintf("m%d", i+1), i+1)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("start daemons: %w", err)
	}
	daemonsUp := time.Since(began)

	m1 := ms[0]
	preseed := fmt.Sprintf(`config:
  core.https_address: %s
storage_pools:
- name: %s
  driver: dir
cluster:
  server_name: %s
  enabled: true
`, m1.Address, Pool, m1.Name)
	if out, err := c.CLIInput(m1, preseed, "admin", "init", "--preseed"); err != nil {
		return c, fmt.Errorf("bootstrap %s: %v\n%s", m1.Name, err, out)
	}
	c.Members = []*Member{m1}
	c.URL = m1.URL()
	c.ClusterCertFile = filepath.Join(dir, "cluster.crt")
	if err := copyFile(filepath.Join(m1.Dir, "cluster.crt"), c.ClusterCertFile); err != nil {
		return c, err
	}
	if o.Identity != nil {
		c.ClientCertFile, c.ClientKeyFile = o.Identity.CertFile, o.Identity.KeyFile
	} else if err := c.makeClientCert(); err != nil {
		return c, err
	}
	if !o.Untrusted {
		if err := c.trustClientCert(m1); err != nil {
			return c, err
		}
	}
	c.Config = c.ConfigFor(m1)
	bootstrapped := time.Since(began)

	for _, m := range ms[1:] {
		if err := c.join(m); err != nil {
			return c, err
		}
	}

	// The cluster must answer over HTTPS with every member online (through the socket
	// when it trusts no client).
	answers := c.ConfigFor(ms[len(ms)-1])
	if o.Untrusted {
		answers = c.SocketConfig(ms[len(ms)-1])
	}
	cl, err := incus.New(answers)
	if err != nil {
		return c, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	members, err := cl.Members(ctx)
	if err != nil {
		return c, fmt.Errorf("list members over HTTPS: %w", err)
	}
	if len(members) != n {
		return c, fmt.Errorf("%d members listed, want %d", len(members), n)
	}
	for _, m := range members {
		if m.Status != incus.MemberOnline {
			return c, fmt.Errorf("member %s is %s (%s)", m.ServerName, m.Status, m.Message)
		}
	}
	if o.Keep {
		if err := os.WriteFile(filepath.Join(dir, "env"), []byte(c.envFile()), 0o644); err != nil {
			return c, err
		}
		// The daemons hold the block's lock from here on: it is free when the last stops.
		c.lock.Close()
		c.lock = nil
	}
	c.StartupTime = time.Since(began)
	c.summary = fmt.Sprintf("%d-member Incus cluster on %s1…%d:%d in %s ready in %s (daemons %s, bootstrap+trust %s, joins %s)",
		n, c.Block, n, Port, c.Dir, c.StartupTime.Round(time.Millisecond), daemonsUp.Round(time.Millisecond),
		(bootstrapped - daemonsUp).Round(time.Millisecond), (c.StartupTime - bootstrapped).Round(time.Millisecond))
	return c, nil
}

// envFile is what points the product at member 1 (cmd/incus-lab env).
func (c *Cluster) envFile() string {
	return fmt.Sprintf("export APELORA_INCUS_URL=%s\nexport APELORA_INCUS_CLIENT_CERT=%s\nexport APELORA_INCUS_CLIENT_KEY=%s\nexport APELORA_INCUS_SERVER_CERT=%s\n",
		c.URL, c.ClientCertFile, c.ClientKeyFile, c.ClusterCertFile)
}

// Summary says what Launch started and how long each part took.
func (c *Cluster) Summary() string { return c.summary }

// Require returns the paths of incusd and the incus CLI, or skips the test (fails it
// under CI=true) when they are missing or the test is not root. APELORA_INCUSD overrides
// the daemon path.
func Require(t TB) (incusd, cli string) {
	t.Helper()
	incusd, cli, problem := FindTools()
	if problem == "" {
		return incusd, cli
	}
	msg := "INCUS LAB UNAVAILABLE: " + problem + "; install incus-base and incus-client from " +
		"bookworm-backports (scripts/test-deps.sh does it) and run the tests as root"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: a missing Incus is a failure)")
	}
	t.Skip(msg)
	return "", ""
}

// FindTools returns the paths of incusd (APELORA_INCUSD, or Debian's) and the incus CLI,
// or what is missing.
func FindTools() (incusd, cli, problem string) {
	incusd = os.Getenv("APELORA_INCUSD")
	if incusd == "" {
		incusd = DefaultIncusd
	}
	if st, err := os.Stat(incusd); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", "", fmt.Sprintf("incusd not found at %s", incusd)
	}
	cli, err := exec.LookPath("incus")
	if err != nil {
		return "", "", "the incus CLI is not in PATH"
	}
	if os.Geteuid() != 0 {
		return "", "", "incusd needs root and this is not running as root"
	}
	return incusd, cli, ""
}

// ReserveBlock picks a free 127.X.Y.0/24 block (X in 100–199) whose hosts .1 … .hosts have
// nothing listening on the Incus port, and returns its prefix "127.X.Y." with the held
// lock file; closing the file releases the block.
func ReserveBlock(hosts int) (string, *os.File, error) {
	if err := os.MkdirAll(LockDir, 0o755); err != nil {
		return "", nil, err
	}
	for range 200 {
		prefix := fmt.Sprintf("127.%d.%d.", 100+mrand.IntN(100), mrand.IntN(256))
		f, err := os.OpenFile(filepath.Join(LockDir, prefix+"lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return "", nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		if !hostsFree(prefix, 1, hosts) {
			f.Close()
			continue
		}
		_ = f.Truncate(0)
		fmt.Fprintf(f, "pid %d\n", os.Getpid())
		return prefix, f, nil
	}
	return "", nil, errors.New("no free 127.X.Y.0/24 address block found after 200 tries")
}

// reserve locks the given block (prefix "127.X.Y." or "127.X.Y") for hosts .1 … .hosts,
// with the same lock files as ReserveBlock.
func reserve(prefix string, hosts int) (string, *os.File, error) {
	prefix = strings.TrimSuffix(prefix, ".") + "."
	if ip := net.ParseIP(prefix + "1"); ip == nil || !ip.IsLoopback() || ip.To4() == nil {
		return "", nil, fmt.Errorf("address block %q is not 127.X.Y", strings.TrimSuffix(prefix, "."))
	}
	if err := os.MkdirAll(LockDir, 0o755); err != nil {
		return "", nil, err
	}
	f, err := os.OpenFile(filepath.Join(LockDir, prefix+"lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return "", nil, fmt.Errorf("address block %s0/24 is in use by another lab", prefix)
	}
	for i := 1; i <= hosts; i++ {
		if !hostsFree(prefix, i, i) {
			f.Close()
			return "", nil, fmt.Errorf("%s%d:%d is already in use", prefix, i, Port)
		}
	}
	return prefix, f, nil
}

// hostsFree reports whether nothing listens on prefix+i:Port for i in [from, to].
func hostsFree(prefix string, from, to int) bool {
	for i := from; i <= to; i++ {
		l, err := net.Listen("tcp", net.JoinHostPort(prefix+strconv.Itoa(i), strconv.Itoa(Port)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// startDaemon starts an incusd in Dir/name for host number host and waits until it is ready.
func (c *Cluster) startDaemon(name string, host int) (*Member, error) {
	m := &Member{
		Name:    name,
		Address: net.JoinHostPort(c.Block+strconv.Itoa(host), strconv.Itoa(Port)),
		Dir:     filepath.Join(c.Dir, name),
	}
	if err := os.MkdirAll(m.Dir, 0o711); err != nil {
		return nil, err
	}
	if err := c.spawn(m); err != nil {
		return nil, err
	}
	return m, nil
}

// spawn runs incusd for m (its directory may already hold state) and waits until ready.
func (c *Cluster) spawn(m *Member) error {
	out, err := os.OpenFile(filepath.Join(m.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(c.incusd, "--group", "root", "--verbose", "--logfile", m.LogFile())
	cmd.Env = append(cleanEnv(), "INCUS_DIR="+m.Dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid:    true,            // own session and process group: killed as a group, untouched by the terminal
		Pdeathsig: syscall.SIGKILL, // and gone when the test process dies
	}
	if c.keep {
		// Outlives this process, and holds the block's lock while it runs.
		cmd.SysProcAttr.Pdeathsig = 0
		cmd.ExtraFiles = []*os.File{c.lock}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start incusd for %s: %w", m.Name, err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "address"), []byte(m.Address+"\n"), 0o644); err != nil {
		return err
	}
	c.mu.Lock()
	m.cmd, m.PID, m.exited, m.state = cmd, cmd.Process.Pid, make(chan struct{}), "running"
	c.mu.Unlock()
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(m.exited)
	c.mu.Lock()
	known := false
	for _, d := range c.daemons {
		known = known || d == m
	}
	if !known {
		c.daemons = append(c.daemons, m)
	}
	c.mu.Unlock()

	if out, err := c.CLI(m, "admin", "waitready", "--timeout", strconv.Itoa(int(readyTimeout.Seconds()))); err != nil {
		select {
		case <-m.exited:
			return fmt.Errorf("incusd for %s exited at start (see %s): %s", m.Name, m.LogFile(), tail(m.LogFile(), 20))
		default:
		}
		return fmt.Errorf("incusd for %s not ready: %v: %s", m.Name, err, out)
	}
	return nil
}

// cleanEnv is the test's environment without INCUS_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INCUS_") {
			env = append(env, kv)
		}
	}
	return env
}

// Env returns the variables that point the incus CLI (or a script such as
// enrol-member.sh) at this member: INCUS_DIR and an INCUS_CONF inside the lab.
func (c *Cluster) Env(m *Member) []string {
	return []string{"INCUS_DIR=" + m.Dir, "INCUS_CONF=" + c.cliConf}
}

// CLI runs the incus CLI against member m's unix socket and returns its standard output
// (the error carries standard error).
func (c *Cluster) CLI(m *Member, args ...string) (string, error) {
	return c.CLIInput(m, "", args...)
}

// CLIInput is CLI with stdin.
func (c *Cluster) CLIInput(m *Member, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.cli, args...)
	cmd.Env = append(cleanEnv(), c.Env(m)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("incus %s on %s: %w: %s", strings.Join(args, " "), m.Name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// ConfigFor returns an HTTPS configuration for member m: its address, the pinned cluster
// certificate and the client certificate.
func (c *Cluster) ConfigFor(m *Member) incus.Config {
	return incus.Config{
		URL:            m.URL(),
		ClientCertFile: c.ClientCertFile,
		ClientKeyFile:  c.ClientKeyFile,
		ServerCertFile: c.ClusterCertFile,
		Timeout:        60 * time.Second,
	}
}

// SocketConfig returns a configuration for member m's unix socket.
func (c *Cluster) SocketConfig(m *Member) incus.Config {
	return incus.Config{SocketPath: m.Socket(), Timeout: 60 * time.Second}
}

// Client returns an HTTPS client for member m (closed with the lab).
func (c *Cluster) Client(t TB, m *Member) *incus.Client {
	t.Helper()
	return c.newClient(t, c.ConfigFor(m))
}

// SocketClient returns a unix-socket client for member m (closed with the lab).
func (c *Cluster) SocketClient(t TB, m *Member) *incus.Client {
	t.Helper()
	return c.newClient(t, c.SocketConfig(m))
}

func (c *Cluster) newClient(t TB, cfg incus.Config) *incus.Client {
	t.Helper()
	cl, err := incus.New(cfg)
	if err != nil {
		t.Fatalf("incuslab: client for %s: %v", cfg.URL+cfg.SocketPath, err)
	}
	c.mu.Lock()
	c.clients = append(c.clients, cl)
	c.mu.Unlock()
	return cl
}

// Member returns the member (or unjoined daemon) called name, or nil.
func (c *Cluster) Member(name string) *Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.daemons {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// makeClientCert writes an ECDSA P-256 client certificate and key into the lab directory.
func (c *Cluster) makeClientCert() error {
	id, err := NewIdentity(c.Dir)
	if err != nil {
		return err
	}
	c.ClientCertFile, c.ClientKeyFile = id.CertFile, id.KeyFile
	return nil
}

// writeIdentity writes an ECDSA P-256 client certificate and key where id says.
func writeIdentity(id *ClientIdentity) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "apelora-lab", Organization: []string{"Apelora"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(id.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(id.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// trustClientCert adds the client certificate to the trust store over m's unix socket.
func (c *Cluster) trustClientCert(m *Member) error { return c.trustCertFile(m, c.ClientCertFile) }

// trustCertFile adds the certificate in file to the trust store over m's unix socket.
func (c *Cluster) trustCertFile(m *Member, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	block, _ := pem.Decode(data)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	cl, err := incus.New(c.SocketConfig(m))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cl.AddTrustedCertificate(ctx, "apelora-lab", cert, "Apelora admin identity (test lab)")
	return err
}

// issuer returns a running cluster member to issue tokens from.
func (c *Cluster) issuer() (*Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.Members {
		if m.state == "running" {
			return m, nil
		}
	}
	return nil, errors.New("no running cluster member")
}

// join makes the running, unclustered daemon m a member, with a token issued through our
// own client (so a wrongly encoded token would fail here) and the CLI's preseed join.
func (c *Cluster) join(m *Member) error {
	from, err := c.issuer()
	if err != nil {
		return fmt.Errorf("join %s: %w", m.Name, err)
	}
	cl, err := incus.New(c.SocketConfig(from))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := cl.IssueJoinToken(ctx, m.Name)
	if err != nil {
		return fmt.Errorf("join %s: %w", m.Name, err)
	}
	preseed := fmt.Sprintf(`cluster:
  enabled: true
  server_name: %s
  server_address: %s
  cluster_token: %s
  member_config:
  - entity: storage-pool
    name: %s
    key: source
    value: ""
`, m.Name, m.Address, tok.Reveal(), Pool)
	if out, err := c.CLIInput(m, preseed, "admin", "init", "--preseed"); err != nil {
		// The CLI follows the join over a websocket to the joining daemon, which rebinds
		// its listeners while it joins; on a loaded machine that websocket is sometimes
		// cut (close 1006) though the join itself goes through. Believe the cluster.
		if !joinedAnyway(cl, m.Name) {
			return fmt.Errorf("join %s: %w %s", m.Name, err, out)
		}
	}
	c.mu.Lock()
	c.Members = append(c.Members, m)
	c.mu.Unlock()
	return nil
}

// joinedAnyway waits up to 30 s for name to be an Online member as the issuing member sees it.
func joinedAnyway(cl *incus.Client, name string) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, _, err := cl.Member(ctx, name)
		cancel()
		if err == nil && m.Status == incus.MemberOnline {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}

// StartUnjoined starts a fresh, unclustered incusd called name on the lab's next free
// address (no core.https_address yet), for tests that join it themselves, for example
// scripts/enrol-member.sh with Env(m) and a token on stdin. It is not in Members; call
// Join to make it a member through the lab, or AddMember after joining it yourself.
func (c *Cluster) StartUnjoined(t TB, name string) *Member {
	t.Helper()
	if err := machines.ValidateName(name); err != nil {
		t.Fatalf("incuslab: %v", err)
	}
	if c.Member(name) != nil {
		t.Fatalf("incuslab: a daemon called %s already runs in this lab", name)
	}
	c.mu.Lock()
	host := c.next
	c.next++
	c.mu.Unlock()
	if host > 254 {
		t.Fatal("incuslab: address block exhausted")
	}
	if !hostsFree(c.Block, host, host) {
		t.Fatalf("incuslab: %s%d:%d is in use", c.Block, host, Port)
	}
	m, err := c.startDaemon(name, host)
	if err != nil {
		t.Fatalf("incuslab: %v", err)
	}
	return m
}

// Join makes an unjoined daemon (from StartUnjoined) a cluster member, as Start does.
func (c *Cluster) Join(t TB, m *Member) {
	t.Helper()
	if err := c.join(m); err != nil {
		t.Fatalf("incuslab: %v", err)
	}
}

// AddMember records m, joined by other means (enrol-member.sh), as a member.
func (c *Cluster) AddMember(m *Member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.Members {
		if x == m {
			return
		}
	}
	c.Members = append(c.Members, m)
}

func (c *Cluster) state(m *Member) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m.state
}

func (c *Cluster) signal(m *Member, sig syscall.Signal) error {
	if c.state(m) == "stopped" || !m.Running() {
		return fmt.Errorf("incuslab: %s (pid %d) is not running", m.Name, m.PID)
	}
	// Negative PID: the whole process group (incusd is its leader through setsid).
	if err := syscall.Kill(-m.PID, sig); err != nil {
		return fmt.Errorf("incuslab: signal %v to %s (pid %d): %w", sig, m.Name, m.PID, err)
	}
	return nil
}

// Freeze stops member m with SIGSTOP, like a hung host: its port stays open, nothing
// answers. Do not freeze the only database voter.
func (c *Cluster) Freeze(m *Member) error {
	if err := c.signal(m, syscall.SIGSTOP); err != nil {
		return err
	}
	if err := WaitStopped(m.PID, 30*time.Second); err != nil {
		return err
	}
	c.setState(m, "frozen")
	return nil
}

// Thaw resumes a frozen member with SIGCONT.
func (c *Cluster) Thaw(m *Member) error {
	if err := c.signal(m, syscall.SIGCONT); err != nil {
		return err
	}
	c.setState(m, "running")
	return nil
}

// Kill kills member m with SIGKILL, like a dead host, and waits for it. Its directory is
// kept, so RestartMember can bring it back.
func (c *Cluster) Kill(m *Member) error {
	if err := c.signal(m, syscall.SIGKILL); err != nil {
		return err
	}
	return c.waitExit(m)
}

// StopMember stops member m cleanly (SIGTERM, then SIGKILL after 30 s) and waits for it.
func (c *Cluster) StopMember(m *Member) error {
	if c.state(m) == "frozen" {
		_ = c.Thaw(m)
	}
	if err := c.signal(m, syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-m.exited:
		c.setState(m, "stopped")
		return nil
	case <-time.After(killTimeout):
		return c.Kill(m)
	}
}

// RestartMember starts a stopped or killed member again on its directory and address,
// and waits until it is ready.
func (c *Cluster) RestartMember(m *Member) error {
	if st := c.state(m); st != "stopped" {
		return fmt.Errorf("incuslab: %s is %s, stop or kill it first", m.Name, st)
	}
	return c.spawn(m)
}

func (c *Cluster) waitExit(m *Member) error {
	select {
	case <-m.exited:
		c.setState(m, "stopped")
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("incuslab: %s (pid %d) did not exit", m.Name, m.PID)
	}
}

func (c *Cluster) setState(m *Member, s string) {
	c.mu.Lock()
	m.state = s
	c.mu.Unlock()
}

// Running reports whether m's process is running (frozen counts as running).
func (m *Member) Running() bool {
	select {
	case <-m.exited:
		return false
	default:
		return m.exited != nil
	}
}

// teardown dumps the logs of a failed test, then closes the lab.
func (c *Cluster) teardown(t TB) {
	if t.Failed() {
		c.DumpLogs(t)
	}
	if err := c.Close(); err != nil {
		t.Errorf("incuslab: %v", err)
	}
}

// Close kills every daemon, waits for them, unmounts what incusd mounted under the lab
// directory, removes it and releases the address block.
func (c *Cluster) Close() error {
	for _, cl := range c.clients {
		cl.Close()
	}
	c.mu.Lock()
	daemons := append([]*Member(nil), c.daemons...)
	c.mu.Unlock()
	var errs []error
	for _, m := range daemons {
		if m.Running() {
			_ = syscall.Kill(-m.PID, syscall.SIGKILL)
		}
	}
	for _, m := range daemons {
		if m.exited == nil {
			continue
		}
		select {
		case <-m.exited:
		case <-time.After(killTimeout):
			errs = append(errs, fmt.Errorf("%s (pid %d) did not exit after SIGKILL", m.Name, m.PID))
		}
	}
	if err := unmountUnder(c.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", c.Dir, err))
	}
	if c.lock != nil {
		c.lock.Close()
	}
	return errors.Join(errs...)
}

// DumpLogs prints the end of every daemon's logs through t.Logf.
func (c *Cluster) DumpLogs(t TB) {
	c.mu.Lock()
	daemons := append([]*Member(nil), c.daemons...)
	c.mu.Unlock()
	for _, m := range daemons {
		t.Logf("incuslab: ---- %s (pid %d, %s) %s ----\n%s", m.Name, m.PID, m.Address, m.LogFile(), tail(m.LogFile(), 200))
		if s := tail(filepath.Join(m.Dir, "stdout.log"), 50); strings.TrimSpace(s) != "" {
			t.Logf("incuslab: ---- %s stdout/stderr ----\n%s", m.Name, s)
		}
	}
}

// tail returns the last n lines of a file.
func tail(file string, n int) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… %d earlier lines", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// unmountUnder lazily unmounts everything mounted below dir (incusd mounts tmpfs on
// shmounts and guestapi), deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount decodes the octal escapes (\040 …) of /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
