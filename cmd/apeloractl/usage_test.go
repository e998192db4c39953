package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// closedURL is an http:// address on loopback where nothing listens: any request to it
// is refused at once.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// ctl runs the test binary as apeloractl with args (see TestMain) and env, and returns
// its standard output, standard error and exit status.
func ctl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "APELORA_CTL_MAIN="+strings.Join(args, " ")), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	status := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		status = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), status
}

// The commands apeloractl knows are those its usage text lists, and each reaches its own
// handler: none is answered "unknown command".
func TestEveryListedCommandIsACommand(t *testing.T) {
	if len(commands) < 25 || !slices.Contains(commands, "evacuate") || !slices.Contains(commands, "help") || !slices.Contains(commands, "rolling-reboot") {
		t.Fatalf("commands read from the usage text: %v", commands)
	}
	t.Setenv("APELORA_URL", closedURL(t))
	t.Setenv("APELORA_TOKEN", "apl_unused")
	for _, c := range commands {
		if err := run(t.Context(), []string{c, "-zz"}, io.Discard); err != nil && strings.Contains(err.Error(), "unknown command") {
			t.Errorf("%s is listed but not run: %v", c, err)
		}
	}
}

// A mistyped command is one short usage error naming the nearest commands (exit status
// 2), asked of no server; help prints the usage on standard output.
func TestAMistypedCommandGetsASuggestion(t *testing.T) {
	env := []string{"APELORA_URL=" + closedURL(t), "APELORA_TOKEN=apl_unused"}
	for _, c := range []struct{ typed, says string }{
		{"machnes", `unknown command "machnes": did you mean machines or machine?`},
		{"evacaute", `did you mean evacuate?`},
		{"identity", `did you mean identities?`},
		{"rolling", `did you mean rolling-reboot?`},
		{"watch-audits", `did you mean watch-audit?`},
		{"Machines", `did you mean machines`},
		{"frobnicate", `unknown command "frobnicate" (apeloractl help lists every command)`},
	} {
		stdout, stderr, status := ctl(t, env, c.typed, "node-1")
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, c.says) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("apeloractl %s: exit %d, stdout %q, stderr %q; want exit %d and one line saying %q", c.typed, status, stdout, stderr, exitUsage, c.says)
		}
		if strings.Contains(stderr, "UNAVAILABLE") {
			t.Errorf("apeloractl %s asked the server: %s", c.typed, stderr)
		}
	}
	stdout, stderr, status := ctl(t, env, "help")
	if status != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: apeloractl") || !strings.Contains(stdout, "rolling-reboot") {
		t.Errorf("apeloractl help: exit %d, stderr %q, stdout %.80q", status, stderr, stdout)
	}
	stdout, _, status = ctl(t, env, "evacuate", "-h")
	if status != 0 || !strings.HasPrefix(stdout, "usage: apeloractl evacuate NAME [-mode auto|migrate|live-migrate|stop] [-cluster NAME]\n  maintenance:") {
		t.Errorf("apeloractl evacuate -h: exit %d, stdout %q", status, stdout)
	}
}

// A flag a command does not take, and a word after the flags, are usage errors (exit
// status 2) naming the nearest flag, refused before anything is asked of the server; none
// is ignored. Every command is tried (a new one needs its line here).
func TestAnUnknownFlagIsAUsageError(t *testing.T) {
	t.Setenv("APELORA_URL", closedURL(t))
	t.Setenv("APELORA_TOKEN", "apl_unused")
	// Each command with what it needs before its flags.
	before := map[string][]string{
		"machine": {"node-1"}, "register": {"node-1"}, "unregister": {"node-1"}, "approve": {"node-1"},
		"revoke": {"node-1"}, "report": {"node-1"}, "admit": {"node-1"}, "remove": {"node-1"},
		"evacuate": {"node-1"}, "restore": {"node-1"}, "rolling-reboot": {"start", "node-1"},
		"bulk": {"register", "node-1"}, "watch-admission": {"node-1"}, "commission": {"sys001"},
		"install": {"node-1"}, "hardware-test": {"sys001"}, "release": {"sys001"},
		"create-identity": {"ci", "-permission", "view-infrastructure"}, "revoke-identity": {"ci"},
		"placement-guard": {"on"}, "set-hardware-profile": {"gen2"}, "remove-hardware-profile": {"gen2"},
		"assign-hardware-profile": {"node-1", "gen2"}, "clear-hardware-profile": {"node-1"},
		"set-fence-mapping": {"node-1"}, "remove-fence-mapping": {"node-1"},
	}
	for _, c := range commands {
		if c == "help" {
			continue
		}
		args := append(append([]string{c}, before[c]...), "-colour", "red")
		err := run(t.Context(), args, io.Discard)
		if err == nil || exitStatus(err) != exitUsage || !strings.Contains(err.Error(), c+": flag provided but not defined: -colour") {
			t.Errorf("apeloractl %s: %v (exit %d), want a usage error naming -colour", strings.Join(args, " "), err, exitStatus(err))
		}
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"evacuate", "node-1", "-mod", "stop"}, "flag provided but not defined: -mod: did you mean -mode?"},
		{[]string{"register", "node-1", "-descripton", "rack 4"}, "did you mean -description?"},
		{[]string{"admit", "node-1", "-dryrun"}, "did you mean -dry-run?"},
		{[]string{"remove", "node-1", "-dry-rnu"}, "did you mean -dry-run?"},
		{[]string{"-jsno", "machines"}, "flag provided but not defined: -jsno: did you mean -json?"},
		{[]string{"commission", "sys001", "-series", "noble"}, "commission: flag provided but not defined: -series"},
		{[]string{"remove", "node-1", "now", "-force"}, `remove: unexpected argument "now"`},
		{[]string{"register", "node-1", "-description", "rack 4", "extra"}, `register: unexpected argument "extra"`},
		{[]string{"machines", "node-1"}, `machines: unexpected argument "node-1"`},
		{[]string{"restore", "node-1", "node-2"}, `restore: unexpected argument "node-2"`},
		{[]string{"audit", "-machine", "node-1", "-frist", "5"}, "did you mean -first?"},
	} {
		err := run(t.Context(), c.args, io.Discard)
		if err == nil || exitStatus(err) != exitUsage || !strings.Contains(err.Error(), c.says) {
			t.Errorf("apeloractl %s: %v (exit %d), want a usage error saying %q", strings.Join(c.args, " "), err, exitStatus(err), c.says)
		}
	}
}

// A server that cannot be reached is UNAVAILABLE with APELORA_URL and the reason, for a
// query, a subscription and sign-in alike: never a raw Go error.
func TestAnUnreachableServerIsUnavailable(t *testing.T) {
	url := closedURL(t)
	want := fmt.Sprintf("UNAVAILABLE: cannot reach APELORA_URL (%s: connection refused): is apelora serve running?", url)
	for _, args := range [][]string{{"machines"}, {"watch-audit"}, {"evacuate", "node-1"}, {"bulk", "admit", "node-1"}, {"login"}} {
		stdout, stderr, status := ctl(t, []string{"APELORA_URL=" + url + "/", "APELORA_TOKEN=apl_unused"}, args...)
		if status != exitError || stdout != "" || stderr != want+"\n" {
			t.Errorf("apeloractl %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), status, stderr, exitError, want)
		}
	}
	// Without a token the first request is refused for that, still before any connection.
	_, stderr, status := ctl(t, []string{"APELORA_URL=" + url, "APELORA_TOKEN=", "APELORA_SESSION_FILE=" + t.TempDir() + "/none"}, "machines")
	if status != exitUnauthenticated || !strings.HasPrefix(stderr, "UNAUTHENTICATED: APELORA_TOKEN is not set") {
		t.Errorf("apeloractl machines without a token: exit %d, %q", status, stderr)
	}
}

// The same words against a running server: a real answer still comes through after the
// changes to how errors are worded.
func TestARunningServerStillAnswers(t *testing.T) {
	e := producttest.Start(t)
	_, stderr, status := ctl(t, []string{"APELORA_URL=" + e.Base, "APELORA_TOKEN=" + e.Identity("viewer", identity.ViewInfrastructure)}, "machines")
	if status != 0 || stderr != "" {
		t.Fatalf("apeloractl machines: exit %d, %q", status, stderr)
	}
}

func TestNearest(t *testing.T) {
	for _, c := range []struct {
		word string
		want []string
	}{
		{"machnes", []string{"machines", "machine"}},
		{"mahcines", []string{"machines", "machine"}},
		{"admti", []string{"admit"}},
		{"x", nil},
		{"zzzzzzzz", nil},
	} {
		if got := nearest(c.word, commands); !slices.Equal(got, c.want) {
			t.Errorf("nearest(%q) = %v, want %v", c.word, got, c.want)
		}
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "abc", 3}, {"abc", "abc", 0}, {"abc", "acb", 1}, {"kitten", "sitting", 3}, {"évacuer", "evacuer", 1}} {
		if got := distance(c.a, c.b); got != c.d {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
