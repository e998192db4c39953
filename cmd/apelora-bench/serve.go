package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/testkit/incuslab"
)

// cleanups run in reverse order when the bench ends, however it ends.
type cleanups []func()

func (c *cleanups) add(f func()) { *c = append(*c, f) }

func (c *cleanups) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// raiseFileLimit lets this process (and the server it starts, which inherits the limit)
// hold want open files.
func raiseFileLimit(want uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur >= want {
		return l.Cur, nil
	}
	if l.Max < want {
		l.Max = want // only root may raise the hard limit; say so if refused
	}
	l.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("raise the open-file limit to %d: %w (run `ulimit -n %d` first, or as root)", want, err, want)
	}
	return want, nil
}

// benchDatabase creates a fresh database on the PostgreSQL of adminURL and returns its URL;
// the cleanup drops it.
func benchDatabase(ctx context.Context, adminURL string, c *cleanups) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL at APELORA_TEST_DATABASE_URL: %w", err)
	}
	defer conn.Close(ctx)
	name := "apelora_bench_" + randomHex(6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create the bench database: %w", err)
	}
	c.add(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			fmt.Fprintf(os.Stderr, "apelora-bench: drop database %s: %v\n", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "apelora-bench: drop database %s: %v\n", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("APELORA_TEST_DATABASE_URL is not a URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// startLab starts a 1-member Incus lab (testkit/incuslab) on a random block of
// 127.43.0.0/16 (away from cmd/incus-lab's default and the Go tests' blocks) and returns
// the APELORA_INCUS_* variables for it; the cleanup stops it.
func startLab(c *cleanups) ([]string, error) {
	incusd, cli, problem := incuslab.FindTools()
	if problem != "" {
		return nil, fmt.Errorf("no Incus configured (APELORA_INCUS_URL) and no lab can start: %s", problem)
	}
	for attempt := 0; ; attempt++ {
		block := fmt.Sprintf("127.43.%d", 1+int(randomByte())%250)
		lab, err := incuslab.Launch(incuslab.Options{Members: 1, Incusd: incusd, CLI: cli, Block: block})
		if lab != nil {
			c.add(func() {
				if err := lab.Close(); err != nil {
					fmt.Fprintf(os.Stderr, "apelora-bench: stop the Incus lab in %s: %v\n", lab.Dir, err)
				}
			})
		}
		if err != nil {
			if attempt < 4 && strings.Contains(err.Error(), "in use") {
				continue
			}
			return nil, fmt.Errorf("start an Incus lab: %w", err)
		}
		return []string{"APELORA_INCUS_URL=" + lab.URL, "APELORA_INCUS_CLIENT_CERT=" + lab.ClientCertFile,
			"APELORA_INCUS_CLIENT_KEY=" + lab.ClientKeyFile, "APELORA_INCUS_SERVER_CERT=" + lab.ClusterCertFile}, nil
	}
}

func randomByte() byte {
	var b [1]byte
	_, _ = rand.Read(b[:])
	return b[0]
}

// buildApelora builds cmd/apelora into dir; the bench runs from the repository root.
func buildApelora(ctx context.Context, dir string) (string, error) {
	mod, err := os.ReadFile("go.mod")
	if err != nil || !strings.Contains(string(mod), "module github.com/apelora/fabric") {
		return "", errors.New("run apelora-bench from the repository root (it builds ./cmd/apelora), or give -apelora with a built binary")
	}
	bin := filepath.Join(dir, "apelora")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/apelora")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/apelora: %w\n%s", err, out)
	}
	return bin, nil
}

// serverEnv is this process's environment without the variables the bench sets, plus env.
func serverEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "GODEBUG", k == "APELORA_LISTEN", k == "APELORA_DATABASE_URL", k == "APELORA_LOG_LEVEL", k == "APELORA_STATE_DIR":
			continue
		}
		out = append(out, kv)
	}
	return append(out, env...)
}

// createIdentity runs `apelora identity create` and returns the bearer token it prints.
func createIdentity(ctx context.Context, bin string, env []string) (string, error) {
	name := "bench-" + randomHex(4)
	cmd := exec.CommandContext(ctx, bin, "identity", "create", "--name", name, "--permission", "view-infrastructure")
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("apelora identity create: %w\n%s", err, stderr.String())
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return "", errors.New("apelora identity create printed no token")
	}
	return lines[len(lines)-1], nil
}

// server is the apelora process the bench started.
type server struct {
	cmd    *exec.Cmd
	base   string
	stderr string // file with its log and GC trace
	exited chan struct{}
}

var servingLine = regexp.MustCompile(`"msg":"apelora serving","graphql":"(http://[^"]+)/graphql"`)

// startServer runs `apelora serve` on a free loopback port with the GC trace on, and
// waits until it is ready.
func startServer(ctx context.Context, bin, dir string, env []string, c *cleanups) (*server, error) {
	logFile := filepath.Join(dir, "server.log")
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(env, "APELORA_LISTEN=127.0.0.1:0", "APELORA_LOG_LEVEL=info", "GODEBUG=gctrace=1")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start apelora serve: %w", err)
	}
	f.Close()
	s := &server{cmd: cmd, stderr: logFile, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	c.add(func() { s.stop() })

	deadline := time.Now().Add(90 * time.Second)
	for s.base == "" {
		if m := servingLine.FindStringSubmatch(readFile(logFile)); m != nil {
			s.base = m[1]
			break
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("apelora serve exited at start:\n%s", tailLines(readFile(logFile), 30))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("apelora serve did not start within 90 s:\n%s", tailLines(readFile(logFile), 30))
		}
	}
	for {
		resp, err := http.Get(s.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("apelora serve at %s is not ready after 90 s:\n%s", s.base, tailLines(readFile(logFile), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop ends the server with SIGTERM (graceful shutdown), then SIGKILL after 20 s.
func (s *server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func readFile(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// rss returns a process's resident set size in bytes (VmRSS of /proc/PID/status).
func rss(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmRSS(f)
}

func parseVmRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line (is the process a zombie?)")
}

// gcLine is one line of the Go runtime's GODEBUG=gctrace=1 output: the heap at the start
// of the cycle, at its end, and marked live; the goal; the stacks scanned (all in MB,
// rounded down by the runtime).
type gcLine struct {
	N                        int
	HeapStart, HeapEnd, Live int64
	Goal, Stacks, Globals    int64
}

var gcPattern = regexp.MustCompile(`(?m)^gc (\d+) @[0-9.]+s [0-9]+%: .* (\d+)->(\d+)->(\d+) MB, (\d+) MB goal, (\d+) MB stacks, (\d+) MB globals`)

// gcLines returns the GC trace lines in a server log.
func gcLines(log string) []gcLine {
	var out []gcLine
	for _, m := range gcPattern.FindAllStringSubmatch(log, -1) {
		v := make([]int64, 7)
		for i := range v {
			v[i], _ = strconv.ParseInt(m[i+1], 10, 64)
		}
		out = append(out, gcLine{N: int(v[0]), HeapStart: v[1], HeapEnd: v[2], Live: v[3], Goal: v[4], Stacks: v[5], Globals: v[6]})
	}
	return out
}

const introspection = `{ __schema { types { name kind description fields(includeDeprecated: true) {
	name description args { name description type { name kind ofType { name kind } } } type { name kind ofType { name kind } } } } } }`

var churnClient = &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil}}

// churn sends n introspection queries: cheap for the server, but they allocate enough
// to make it collect garbage, which is when the GC trace reports the live heap.
func churn(ctx context.Context, base, token string, n int) error {
	body := `{"query":` + strconv.Quote(introspection) + `}`
	for range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/graphql", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := churnClient.Do(req)
		if err != nil {
			return fmt.Errorf("introspection query: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("introspection query: HTTP %s", resp.Status)
		}
	}
	return nil
}

// cpuTime returns the user+system CPU time a process has used (/proc/PID/stat).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// clockTicks is USER_HZ, 100 on every Linux the bench runs on.
const clockTicks = 100

func parseStatCPU(stat string) (time.Duration, error) {
	// The command name (field 2) may hold spaces; the fields after it are plain.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc stat %.80q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat %.80q", stat)
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// selfCPUTime returns this process's user+system CPU time.
func selfCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
