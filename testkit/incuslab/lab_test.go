package incuslab_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/testkit/incuslab"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitStatus polls the member list until name has the wanted status. Heartbeats decide
// when that happens (offline after cluster.offline_threshold, 20 s by default), so this
// waits for a state, never asserts a duration.
func waitStatus(t *testing.T, cl *incus.Client, name, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last incus.Member
	for time.Now().Before(deadline) {
		m, _, err := cl.Member(ctxFor(t), name)
		if err == nil && m.Status == want {
			return
		}
		last = m
		time.Sleep(time.Second)
	}
	t.Fatalf("%s never became %s (last: %s %q)", name, want, last.Status, last.Message)
}

func TestLab(t *testing.T) {
	lab := incuslab.Start(t, 3)
	t.Logf("start took %s", lab.StartupTime)

	t.Run("Shape", func(t *testing.T) {
		if len(lab.Members) != 3 || lab.URL != lab.Members[0].URL() || lab.Config.URL != lab.URL {
			t.Fatalf("%+v", lab)
		}
		seen := map[string]bool{}
		for i, m := range lab.Members {
			if !strings.HasPrefix(m.Address, lab.Block) || !strings.HasSuffix(m.Address, ":8443") || seen[m.Address] ||
				m.PID <= 0 || !m.Running() || !strings.HasPrefix(m.Dir, lab.Dir) {
				t.Errorf("member %d: %+v", i, m)
			}
			seen[m.Address] = true
			// Own session: killed as a group, not by the test's terminal.
			if sid := sessionOf(t, m.PID); sid != m.PID {
				t.Errorf("%s: session %d, want %d", m.Name, sid, m.PID)
			}
			if _, err := os.Stat(m.LogFile()); err != nil {
				t.Errorf("%s: no log: %v", m.Name, err)
			}
		}
		for _, f := range []string{lab.ClientCertFile, lab.ClientKeyFile, lab.ClusterCertFile} {
			if _, err := os.Stat(f); err != nil {
				t.Error(err)
			}
		}
		// The block is locked while the lab lives.
		f, err := os.OpenFile(filepath.Join(incuslab.LockDir, lab.Block+"lock"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
			t.Fatalf("block lock not held: %v", err)
		}
	})

	t.Run("ClientsAndCLI", func(t *testing.T) {
		ctx := ctxFor(t)
		cl, err := incus.New(lab.Config)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if ms, err := cl.Members(ctx); err != nil || len(ms) != 3 {
			t.Fatalf("%v %v", ms, err)
		}
		for _, m := range lab.Members {
			info, err := lab.SocketClient(t, m).ServerInfo(ctx, "")
			if err != nil || info.ServerName != m.Name {
				t.Fatalf("socket %s: %+v %v", m.Name, info, err)
			}
		}
		out, err := lab.CLI(lab.Members[1], "cluster", "list", "--format", "csv")
		if err != nil || strings.Count(out, "ONLINE") != 3 {
			t.Fatalf("CLI: %q %v", out, err)
		}
		env := lab.Env(lab.Members[1])
		if !slices.Contains(env, "INCUS_DIR="+lab.Members[1].Dir) {
			t.Fatalf("env %v", env)
		}
	})

	t.Run("UnjoinedThenJoined", func(t *testing.T) {
		ctx := ctxFor(t)
		m4 := lab.StartUnjoined(t, "m4")
		if slices.Contains(lab.Members, m4) || !strings.HasSuffix(m4.Address, ".4:8443") {
			t.Fatalf("%+v", m4)
		}
		sc := lab.SocketClient(t, m4)
		info, err := sc.ServerInfo(ctx, "")
		if err != nil || info.ServerClustered || info.Config["core.https_address"] != "" {
			t.Fatalf("unjoined: %+v %v", info, err)
		}
		if ci, err := sc.Cluster(ctx); err != nil || ci.Enabled {
			t.Fatalf("unjoined cluster: %+v %v", ci, err)
		}
		lab.Join(t, m4)
		if len(lab.Members) != 4 {
			t.Fatal("m4 not recorded as a member")
		}
		cl := lab.Client(t, lab.Members[0])
		waitStatus(t, cl, "m4", incus.MemberOnline)
		// Three voters already: the fourth member is a stand-by, so freezing it keeps quorum.
		if m, _, err := cl.Member(ctx, "m4"); err != nil || !slices.Contains(m.Roles, "database-standby") {
			t.Fatalf("m4 roles: %+v %v", m.Roles, err)
		}
		if info, err := lab.Client(t, m4).ServerInfo(ctx, ""); err != nil || info.ServerName != "m4" {
			t.Fatalf("HTTPS to m4: %+v %v", info, err)
		}
	})

	t.Run("FreezeThawKillRestart", func(t *testing.T) {
		m4 := lab.Member("m4")
		if m4 == nil {
			t.Skip("needs m4 from UnjoinedThenJoined")
		}
		cl := lab.Client(t, lab.Members[0])
		// m4 is a stand-by (three voters already), so the cluster keeps quorum.
		if err := lab.Freeze(m4); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, cl, "m4", incus.MemberOffline)
		if err := lab.Thaw(m4); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, cl, "m4", incus.MemberOnline)

		oldPID := m4.PID
		if err := lab.Kill(m4); err != nil {
			t.Fatal(err)
		}
		if m4.Running() || syscall.Kill(oldPID, 0) == nil {
			t.Fatal("m4 still running after Kill")
		}
		if err := lab.RestartMember(m4); err != nil {
			t.Fatal(err)
		}
		if m4.PID == oldPID || !m4.Running() {
			t.Fatalf("restart: pid %d (was %d)", m4.PID, oldPID)
		}
		waitStatus(t, cl, "m4", incus.MemberOnline)
		if err := lab.StopMember(m4); err != nil || m4.Running() {
			t.Fatalf("stop: %v", err)
		}
	})

	t.Run("DumpLogs", func(t *testing.T) {
		rec := &recorder{TB: t}
		lab.DumpLogs(rec)
		if !strings.Contains(rec.out.String(), "---- m1") {
			t.Fatalf("%q", rec.out.String())
		}
	})
}

type recorder struct {
	testing.TB
	out strings.Builder
}

func (r *recorder) Logf(format string, args ...any) { fmt.Fprintf(&r.out, format, args...) }

// TestLabsInParallel starts two labs at once in one process; the other packages' test
// processes do the same at the same time.
func TestLabsInParallel(t *testing.T) {
	blocks := make(chan string, 2)
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lab := incuslab.Start(t, 1)
			blocks <- lab.Block
			ms, err := lab.Client(t, lab.Members[0]).Members(ctxFor(t))
			if err != nil || len(ms) != 1 {
				t.Fatalf("%v %v", ms, err)
			}
		})
	}
	t.Cleanup(func() {
		close(blocks)
		var seen []string
		for b := range blocks {
			if slices.Contains(seen, b) {
				t.Errorf("two labs shared block %s", b)
			}
			seen = append(seen, b)
		}
	})
}

// sessionOf reads a process's session id from /proc/PID/stat (field 6).
func sessionOf(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	sid, err := strconv.Atoi(fields[3])
	if err != nil {
		t.Fatal(err)
	}
	return sid
}
