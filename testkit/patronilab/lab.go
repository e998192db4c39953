// Package patronilab runs PostgreSQL under Patroni with etcd on loopback, for failover
// tests: one etcd and two PostgreSQL nodes, each under its own Patroni process (the shape
// that fits a 2-core CI runner; three of each is the production shape). Everything is
// Debian's: the patroni, etcd-server and postgresql packages (scripts/install-deps.sh).
//
//	c := patronilab.Start(t, "apelora") // skips loudly without patroni (fails under CI=true)
//	store, _ := postgres.Open(ctx, c.URL, log) // libpq multi-host, target_session_attrs=read-write
//	old := c.WaitPrimary(t, nil)
//	c.Kill(old)                          // SIGKILL its Patroni and its PostgreSQL
//	now := c.WaitPrimary(t, old)         // the standby, promoted
//
// Replication is synchronous (Patroni's synchronous_mode): a commit is acknowledged only
// once the standby has it, and Patroni promotes only that standby, so a primary lost after
// acknowledging a write loses nothing. Asynchronous replication would lose the commits the
// standby had not received yet, and the drill exists to count those.
//
// The configuration is written here, into the lab's folder, sized for tests (Patroni's ttl
// 10 s, loop_wait 1 s); it is not the reference deployment's.
package patronilab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/adapters/postgres/localpg"
	"github.com/apelora/fabric/testkit/producttest"
)

// TTL is Patroni's leader-key TTL in the lab: a primary that stops renewing it loses the
// leadership this long after its last renewal, and then the standby is promoted.
const TTL = 10 * time.Second

// startLimit bounds each wait while the lab starts (initdb, base backup, first leader
// election on a shared 2-core machine); a guard against hanging, not a timing assertion.
const startLimit = 2 * time.Minute

// Node is one PostgreSQL under its Patroni.
type Node struct {
	Name    string
	PGPort  int // PostgreSQL on 127.0.0.1
	APIPort int // Patroni's REST API on 127.0.0.1
	Log     string
	dataDir string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Cluster is a running lab.
type Cluster struct {
	Dir   string
	Nodes []*Node
	// URL reaches database db on whichever node is the primary: a libpq multi-host URL
	// with target_session_attrs=read-write, as Apelora is configured in production.
	URL string
	// AdminURL is the same for the postgres database.
	AdminURL string
	etcd     *exec.Cmd
	etcdLog  string
	etcdDone chan struct{}
	t        testing.TB
}

// Require returns the paths of patroni and etcd, or skips the test (fails it under
// CI=true) when either is missing or the test is not root (PostgreSQL runs as the postgres
// user, which only root can switch to).
func Require(t testing.TB) (patroni, etcd string) {
	t.Helper()
	problem := ""
	patroni, err := exec.LookPath("patroni")
	if err != nil {
		problem = "patroni is not installed"
	}
	etcd, err = exec.LookPath("etcd")
	if err != nil && problem == "" {
		problem = "etcd is not installed"
	}
	if _, err := localpg.FindBinDir(); err != nil && problem == "" {
		problem = err.Error()
	}
	if _, err := user.Lookup("postgres"); err != nil && problem == "" {
		problem = "there is no postgres user"
	}
	if os.Geteuid() != 0 && problem == "" {
		problem = "the test is not root (it runs PostgreSQL as the postgres user)"
	}
	if problem == "" {
		return patroni, etcd
	}
	msg := "PATRONI LAB UNAVAILABLE: " + problem + "; install Debian's patroni, etcd-server and postgresql " +
		"(scripts/install-deps.sh does it) and run the tests as root"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: a missing Patroni is a failure)")
	}
	t.Skip(msg)
	return "", ""
}

// Start runs etcd and two Patroni nodes, waits for a primary and a synchronous standby,
// and creates database db on the primary. Everything stops when the test ends.
func Start(t testing.TB, db string) *Cluster {
	t.Helper()
	patroni, etcd := Require(t)
	bin, _ := localpg.FindBinDir()
	pgUser, _ := user.Lookup("postgres")
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}

	// Under /var/tmp, not t.TempDir(): the postgres user must be able to reach the data
	// folders, and /tmp/… test folders are 0700 root.
	dir, err := os.MkdirTemp("/var/tmp", "apelora-patroni-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, t: t}
	t.Cleanup(func() {
		c.stop()
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("patroni lab left in %s for inspection", dir)
		}
	})

	ports := producttest.ListenPorts(t, 6)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	c.etcdLog = filepath.Join(dir, "etcd.log")
	c.etcd, c.etcdDone = c.spawn(etcd, c.etcdLog, nil, "--name", "e1", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e1="+peerURL, "--initial-cluster-state", "new")
	waitFor(t, "etcd answering on "+etcdURL, func() bool { return httpOK(etcdURL + "/health") }, c.etcdLog)

	var hosts []string
	for i := range 2 {
		n := &Node{Name: fmt.Sprintf("pg%d", i+1), PGPort: ports[2+2*i], APIPort: ports[3+2*i]}
		n.Log, n.dataDir = filepath.Join(dir, n.Name+".log"), filepath.Join(dir, n.Name)
		conf := filepath.Join(dir, n.Name+".yml")
		if err := os.WriteFile(conf, []byte(patroniConfig(dir, bin, n, ports[0])), 0o644); err != nil {
			t.Fatal(err)
		}
		n.cmd, n.done = c.spawn(patroni, n.Log, cred, conf)
		c.Nodes = append(c.Nodes, n)
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", n.PGPort))
		if i == 0 {
			// The first node bootstraps alone, so it is the first primary and the second
			// one clones it rather than racing it to initialise.
			c.WaitPrimary(t, nil)
		}
	}
	urlFor := func(name string) string {
		return "postgres://postgres@" + strings.Join(hosts, ",") + "/" + name +
			"?sslmode=disable&target_session_attrs=read-write&connect_timeout=3"
	}
	c.URL, c.AdminURL = urlFor(db), urlFor("postgres")
	waitFor(t, "a synchronous standby", func() bool {
		for _, n := range c.Nodes {
			if httpOK(n.api("/sync")) && !httpOK(n.api("/primary")) {
				return true
			}
		}
		return false
	}, c.Nodes[1].Log)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.AdminURL)
	if err != nil {
		t.Fatalf("connect to the lab's primary: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", db, err)
	}
	return c
}

// patroniConfig is one node's Patroni configuration.
func patroniConfig(dir, bin string, n *Node, etcdPort int) string {
	return fmt.Sprintf(`scope: apelora-lab
name: %[1]s
log:
  level: INFO
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd3:
  host: 127.0.0.1:%[3]d
bootstrap:
  dcs:
    ttl: %[7]d
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 0
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 100
        shared_buffers: 16MB
        wal_keep_size: 64MB
        # The drill kills processes, not machines: what PostgreSQL wrote is in the
        # kernel's cache either way, and the shared CI machine is spared the syncs.
        fsync: "off"
  initdb:
    - encoding: UTF8
    - locale: C
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[4]d
  connect_address: 127.0.0.1:%[4]d
  data_dir: %[5]s/%[1]s
  bin_dir: %[6]s
  pgpass: %[5]s/%[1]s.pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: %[5]s
tags:
  nofailover: false
  noloadbalance: false
`, n.Name, n.APIPort, etcdPort, n.PGPort, dir, bin, int(TTL.Seconds()))
}

// spawn starts a process in a process group of its own (Kill ends the group: Patroni, its
// PostgreSQL and every backend, as a lost machine would), as cred when not nil.
func (c *Cluster) spawn(bin, logFile string, cred *syscall.Credential, args ...string) (*exec.Cmd, chan struct{}) {
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "HOME="+c.Dir, "PATRONI_LOG_FORMAT=%(asctime)s %(levelname)s: %(message)s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		out.Close()
		c.t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(done) }()
	return cmd, done
}

func (n *Node) api(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", n.APIPort, path) }

// Running reports whether the node's Patroni still runs.
func (n *Node) Running() bool {
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// IsPrimary reports whether the node's Patroni says it is the primary and its PostgreSQL
// takes writes (Patroni holds the leader key a moment before the promotion is done).
func (n *Node) IsPrimary() bool {
	if !n.Running() || !httpOK(n.api("/primary")) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", n.PGPort))
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

// WaitPrimary waits until a node other than not is the primary, and returns it.
func (c *Cluster) WaitPrimary(t testing.TB, not *Node) *Node {
	t.Helper()
	var got *Node
	var logs []string
	for _, n := range c.Nodes {
		logs = append(logs, n.Log)
	}
	waitFor(t, "a primary", func() bool {
		for _, n := range c.Nodes {
			if n != not && n.IsPrimary() {
				got = n
				return true
			}
		}
		return false
	}, logs...)
	return got
}

// Kill SIGKILLs the node's Patroni and its PostgreSQL, as a lost machine would end them,
// and returns once both are gone: from then on nothing answers on the node. Patroni starts
// the postmaster in a session of its own (so that PostgreSQL outlives a Patroni restart):
// killing Patroni's process group alone leaves a primary running beside the one Patroni
// then promotes. So Patroni is stopped first (it would start PostgreSQL again), then the
// postmaster's process group (every backend with it) is killed, then Patroni.
func (c *Cluster) Kill(n *Node) error {
	patroni := n.cmd.Process.Pid
	if err := syscall.Kill(-patroni, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s's Patroni: %w", n.Name, err)
	}
	if postmaster := n.postmasterPID(); postmaster > 0 {
		group, err := syscall.Getpgid(postmaster)
		if err != nil || group == syscall.Getpgrp() || group <= 1 {
			group = 0 // not a group of its own: the postmaster alone (its backends follow it)
		}
		if group > 0 {
			err = syscall.Kill(-group, syscall.SIGKILL)
		} else {
			err = syscall.Kill(postmaster, syscall.SIGKILL)
		}
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill %s's PostgreSQL (pid %d): %w", n.Name, postmaster, err)
		}
		for deadline := time.Now().Add(10 * time.Second); n.postmasterPID() > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s's PostgreSQL (pid %d) outlived SIGKILL for 10 s", n.Name, postmaster)
			}
		}
	}
	if err := syscall.Kill(-patroni, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s's Patroni: %w", n.Name, err)
	}
	<-n.done
	return nil
}

// postmasterPID reads the running postmaster's pid from its data folder (0: none).
func (n *Node) postmasterPID() int {
	data, err := os.ReadFile(filepath.Join(n.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0]))
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	// A killed postmaster is a zombie until its parent (init) reaps it: gone all the same.
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(stat), ") Z ") {
		return 0
	}
	return pid
}

func (c *Cluster) stop() {
	for _, n := range c.Nodes {
		_ = c.Kill(n)
	}
	if c.etcd != nil {
		_ = syscall.Kill(-c.etcd.Process.Pid, syscall.SIGKILL)
		<-c.etcdDone
	}
}

// Logs returns the last lines of every log in the lab, for a failure message.
func (c *Cluster) Logs() string {
	files := []string{c.etcdLog}
	for _, n := range c.Nodes {
		files = append(files, n.Log)
	}
	return tails(files...)
}

func tails(files ...string) string {
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(&b, "---- %s (last lines) ----\n%s\n", filepath.Base(f), strings.Join(lines, "\n"))
	}
	return b.String()
}

func waitFor(t testing.TB, what string, cond func() bool, logs ...string) {
	t.Helper()
	deadline := time.Now().Add(startLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("patroni lab: no %s within %s\n%s", what, startLimit, tails(logs...))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

func httpOK(url string) bool {
	resp, err := httpClient.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
