//go:build linux

package scripts_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/scripts"
	"github.com/apelora/fabric/testkit/incuslab"
)

const script = "enrol-member.sh"

// stdinOnly is what the script says when a token is given as an argument.
const stdinOnly = "the join token is read from standard input only, so it stays out of shell history and the process list"

// runGuard only stops a hung script from hanging the test run; no assertion depends on it.
const runGuard = 3 * time.Minute

// tokenJSON is the Incus join token layout, fields in wire order.
type tokenJSON struct {
	ServerName  string   `json:"server_name"`
	Fingerprint string   `json:"fingerprint"`
	Addresses   []string `json:"addresses"`
	Secret      string   `json:"secret"`
	ExpiresAt   string   `json:"expires_at"`
}

func encodeToken(t *testing.T, tj tokenJSON) string {
	t.Helper()
	b, err := json.Marshal(tj)
	if err != nil {
		t.Fatal(err)
	}
	token := base64.StdEncoding.EncodeToString(b)
	hideInLogs(token, tj.Secret)
	return token
}

// tokenOf encodes any JSON value the way a token is encoded.
func tokenOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	token := base64.StdEncoding.EncodeToString(b)
	hideInLogs(token, "")
	return token
}

func decodeToken(t *testing.T, token string) tokenJSON {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		t.Fatalf("decode token: %v", err)
	}
	var tj tokenJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		t.Fatalf("decode token JSON: %v", err)
	}
	return tj
}

// syntheticToken is a well-formed token that no cluster issued.
func syntheticToken(t *testing.T, name string, expires time.Time) string {
	return encodeToken(t, tokenJSON{
		ServerName:  name,
		Fingerprint: strings.Repeat("ab", 32),
		Addresses:   []string{"127.0.0.1:8443"},
		Secret:      strings.Repeat("5e", 32),
		ExpiresAt:   expires.UTC().Format(time.RFC3339Nano),
	})
}

// secrets are the tokens (and their secrets) the tests use; outputs printed on failure show
// them as <TOKEN> and <SECRET>, so test logs never carry a token either.
var secrets struct {
	sync.Mutex
	pairs []string
}

func hideInLogs(token, secret string) {
	secrets.Lock()
	defer secrets.Unlock()
	if token != "" {
		secrets.pairs = append(secrets.pairs, token, "<TOKEN>")
	}
	if secret != "" {
		secrets.pairs = append(secrets.pairs, secret, "<SECRET>")
	}
}

// issue has the cluster issue a join token for name and returns it, hidden from test logs.
func issue(t *testing.T, ctx context.Context, cl *incus.Client, name string) incus.JoinToken {
	t.Helper()
	tok, err := cl.IssueJoinToken(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	hideInLogs(tok.Reveal(), decodeToken(t, tok.Reveal()).Secret)
	return tok
}

func printable(text string) string {
	secrets.Lock()
	defer secrets.Unlock()
	return strings.NewReplacer(secrets.pairs...).Replace(text)
}

// result is one run of the script.
type result struct {
	out  string // standard output and standard error, interleaved
	code int
	args []string
}

// run runs `sh enrol-member.sh args…` with stdin and the extra environment (later entries win).
func run(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", script, err)
	}
	return result{out: out.String(), code: code, args: cmd.Args}
}

func (r result) expect(t *testing.T, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d; output:\n%s", r.code, code, printable(r.out))
	}
	for _, w := range want {
		if !strings.Contains(r.out, w) {
			t.Errorf("output lacks %q; output:\n%s", w, printable(r.out))
		}
	}
}

// neverShows fails if text carries the token, its secret, or a piece of either.
func neverShows(t *testing.T, what, text, token string) {
	t.Helper()
	secret := decodeToken(t, token).Secret
	hideInLogs(token, secret)
	for _, s := range []string{token, token[:24], token[len(token)-24:], secret, secret[:16]} {
		if strings.Contains(text, s) {
			// Say where without printing it: test logs must not carry a token either.
			shown := strings.ReplaceAll(printable(text), s, "<PART OF THE TOKEN>")
			t.Errorf("%s shows the join token (or its secret):\n%s", what, shown)
			return
		}
	}
}

// tool writes an executable shell script called name into dir.
func tool(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// fakeIncus puts an incus first in PATH that records any call and fails: a refusal that is
// meant to happen before the script talks to Incus must leave its log empty.
func fakeIncus(t *testing.T) (env []string, calls func() string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls.log")
	tool(t, dir, "incus", fmt.Sprintf("printf '%%s\\n' \"$*\" >> '%s'\necho 'fake incus: must not be called' >&2\nexit 1\n", log))
	return []string{"PATH=" + dir + ":" + os.Getenv("PATH")}, func() string {
		b, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}
}

// wrapIncus puts an incus first in PATH that records the arguments of every call (never
// its standard input) and runs the real CLI; with failHold, `incus cluster set` fails.
func wrapIncus(t *testing.T, failHold bool) (env []string, calls func() string) {
	t.Helper()
	real, err := exec.LookPath("incus")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "calls.log")
	body := fmt.Sprintf("printf '%%s\\n' \"$*\" >> '%s'\n", log)
	if failHold {
		body += `if [ "$1 $2" = "cluster set" ]; then echo "Error: simulated failure to set the hold" >&2; exit 1; fi` + "\n"
	}
	body += fmt.Sprintf("exec '%s' \"$@\"\n", real)
	tool(t, dir, "incus", body)
	return []string{"PATH=" + dir + ":" + os.Getenv("PATH")}, func() string {
		b, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}
}

func TestEmbedIsTheScript(t *testing.T) {
	onDisk, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(scripts.EnrolMember, onDisk) {
		t.Fatal("scripts.EnrolMember differs from enrol-member.sh")
	}
	if !bytes.HasPrefix(onDisk, []byte("#!/bin/sh\n")) {
		t.Fatal("enrol-member.sh must start with #!/bin/sh")
	}
}

func TestScriptIsCleanPOSIXShell(t *testing.T) {
	for _, shell := range []string{"sh", "dash", "bash"} {
		if _, err := exec.LookPath(shell); err != nil {
			continue
		}
		if out, err := exec.Command(shell, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", shell, script, err, out)
		}
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Skip("shellcheck is not installed (apt-get install shellcheck); only sh -n was checked")
	}
	if out, err := exec.Command("shellcheck", "--shell=sh", "--severity=style", script).CombinedOutput(); err != nil {
		t.Errorf("shellcheck %s: %v\n%s", script, err, out)
	}
}

func TestHelp(t *testing.T) {
	env, calls := fakeIncus(t)
	r := run(t, "", env, "--help")
	r.expect(t, 0, "Usage: sh enrol-member.sh --name NAME --address ADDR[:PORT]", "STANDARD INPUT ONLY", "--member-config ENTITY/NAME/KEY=VALUE", "--dry-run")
	if c := calls(); c != "" {
		t.Errorf("--help called incus: %s", c)
	}
}

// TestRefusesBeforeTouchingIncus: every bad argument and every bad token is refused, with
// what to do, before the script calls incus at all (the fake incus records any call).
func TestRefusesBeforeTouchingIncus(t *testing.T) {
	future := time.Now().Add(3 * time.Hour)
	tok := syntheticToken(t, "node-a", future)
	addr := []string{"--name", "node-a", "--address", "127.0.0.9:8443"}
	noSecret := tokenJSON{ServerName: "node-a", Fingerprint: strings.Repeat("ab", 32), Addresses: []string{"127.0.0.1:8443"}, ExpiresAt: future.UTC().Format(time.RFC3339Nano)}
	noAddresses := noSecret
	shortSecret := noSecret
	shortSecret.Secret = "abc123"
	noAddresses.Secret, noAddresses.Addresses = strings.Repeat("5e", 32), []string{}
	cases := []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  []string
	}{
		{"token as an argument", "", append(slices.Clone(addr), tok), 2, []string{stdinOnly}},
		{"token flag", tok, append(slices.Clone(addr), "--token", tok), 2, []string{stdinOnly}},
		{"token flag with =", tok, append(slices.Clone(addr), "--token="+tok), 2, []string{stdinOnly}},
		{"token flag without a value", tok, append(slices.Clone(addr), "--token"), 2, []string{stdinOnly}},
		{"token as the name", tok, []string{"--name", tok, "--address", "127.0.0.9"}, 2, []string{stdinOnly}},
		{"token's JSON as an argument", tok, append(slices.Clone(addr), `{"server_name":"node-a","secret":"x"}`), 2, []string{stdinOnly}},
		{"stray argument", tok, append(slices.Clone(addr), "extra"), 2, []string{"unexpected argument (not repeated here)"}},
		{"unknown option", tok, append(slices.Clone(addr), "--force"), 2, []string{"unknown option '--force'"}},
		{"missing --address", tok, []string{"--name", "node-a"}, 2, []string{"missing --address", "e.g. --address 192.0.2.10:8443"}},
		{"--address without a value", tok, []string{"--name", "node-a", "--address"}, 2, []string{"--address needs a value"}},
		{"port out of range", tok, []string{"--address", "127.0.0.9:65536"}, 2, []string{"is not a number from 1 to 65535"}},
		{"port not a number", tok, []string{"--address", "127.0.0.9:https"}, 2, []string{"is not a number from 1 to 65535"}},
		{"bad IPv4", tok, []string{"--address", "127.0.0.256"}, 2, []string{"is not a valid address"}},
		{"wildcard IPv4", tok, []string{"--address", "0.0.0.0:8443"}, 2, []string{"wildcard"}},
		{"wildcard IPv6", tok, []string{"--address", "[::]:8443"}, 2, []string{"wildcard"}},
		{"bad host name", tok, []string{"--address", "bad_host!"}, 2, []string{"is not a valid address"}},
		{"address of a member in the token", tok, []string{"--address", "127.0.0.1"}, 2, []string{"is the address of an existing cluster member"}},
		{"bad --name", tok, []string{"--name", "node_a", "--address", "127.0.0.9"}, 2, []string{"is not a valid member name"}},
		{"member config without =", tok, append(slices.Clone(addr), "--member-config", "storage-pool/local/source"), 2, []string{"has no '='", "ENTITY/NAME/KEY=VALUE"}},
		{"member config with two parts", tok, append(slices.Clone(addr), "--member-config", "storage-pool/local=x"), 2, []string{"is not ENTITY/NAME/KEY"}},
		{"member config with four parts", tok, append(slices.Clone(addr), "--member-config", "storage-pool/local/source/x=y"), 2, []string{"has more than three parts"}},
		{"member config for another entity", tok, append(slices.Clone(addr), "--member-config", "disk/local/source=x"), 2, []string{"neither storage-pool nor network"}},
		{"member config with a bad key", tok, append(slices.Clone(addr), "--member-config", "network/br0/par ent=x"), 2, []string{"the key 'par ent' may only hold"}},
		{"member config with a line break", tok, append(slices.Clone(addr), "--member-config", "network/br0/parent=eth0\nx"), 2, []string{"line break"}},
		{"member config twice", tok, append(slices.Clone(addr), "--member-config", "network/br0/parent=a", "--member-config=network/br0/parent=b"), 2, []string{"is given twice"}},
		{"no token", "", addr, 1, []string{"no join token on standard input"}},
		{"only whitespace", " \n\t\n", addr, 1, []string{"no join token on standard input"}},
		{"garbage token", "not a token!\n", addr, 1, []string{"characters that base64 does not use"}},
		{"not base64", "abc\n", addr, 1, []string{"it is not base64"}},
		{"base64 but not JSON", base64.StdEncoding.EncodeToString([]byte("garbage")), addr, 1, []string{"not to the JSON of an Incus join token"}},
		{"token without a secret", tokenOf(t, map[string]any{"server_name": "node-a", "fingerprint": "ab", "addresses": []string{"127.0.0.1:8443"}, "expires_at": noSecret.ExpiresAt}), addr, 1, []string{"has no 'secret'"}},
		{"token with an empty secret", encodeToken(t, noSecret), addr, 1, []string{"the join token's 'secret' is empty or malformed"}},
		{"token with a short secret", encodeToken(t, shortSecret), addr, 1, []string{"the join token's secret is too short"}},
		{"token that is not an object", tokenOf(t, []string{"server_name", "node-a"}), addr, 1, []string{"not to the JSON of an Incus join token"}},
		{"token without addresses", encodeToken(t, noAddresses), addr, 1, []string{"'addresses' is empty or malformed"}},
		{"token for another name", tok, []string{"--name", "node-b", "--address", "127.0.0.9"}, 1, []string{"issued for the member 'node-a', not 'node-b'", "use the token Apelora issued for 'node-b'"}},
		{"expired token", syntheticToken(t, "node-a", time.Now().Add(-time.Minute)), addr, 1, []string{"this join token expired at", "Approve the enrolment again in Apelora for a new token"}},
		{"token with an unreadable expiry", encodeToken(t, tokenJSON{ServerName: "node-a", Fingerprint: "ab", Addresses: []string{"127.0.0.1:8443"}, Secret: strings.Repeat("5e", 32), ExpiresAt: "2099-99-99T99:99:99Z"}), addr, 1, []string{"cannot read the join token's expiry"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, calls := fakeIncus(t)
			r := run(t, tc.stdin, env, tc.args...)
			r.expect(t, tc.code, tc.want...)
			r.expect(t, tc.code, "Nothing was changed on this server.")
			if c := calls(); c != "" {
				t.Errorf("the script called incus before refusing:\n%s", c)
			}
			neverShows(t, "the output", r.out, tok)
		})
	}

	t.Run("wrapped token with CRLF and blanks is read as one", func(t *testing.T) {
		env, calls := fakeIncus(t)
		wrapped := "  " + tok[:40] + "\r\n" + tok[40:] + "  \r\n\n"
		r := run(t, wrapped, env, addr...)
		// It gets as far as the daemon check, which the fake incus fails.
		r.expect(t, 1, "the local incus daemon is not answering", "Start the incus daemon")
		if c := calls(); c != "admin waitready --timeout 30\n" {
			t.Errorf("incus calls: %q, want only the readiness check", c)
		}
		neverShows(t, "the output", r.out, tok)
	})
}

// TestAddressForms: --address takes IPv4, IPv6 (bracketed or bare) or a host name, with the
// port defaulting to 8443; the dry run shows the server_address the join would use. The fake
// incus answers as an unclustered daemon and refuses anything else.
func TestAddressForms(t *testing.T) {
	tok := syntheticToken(t, "node-a", time.Now().Add(time.Hour))
	dir := t.TempDir()
	tool(t, dir, "incus", `case "$*" in
"admin waitready --timeout 30") exit 0 ;;
"query local:/1.0/cluster") echo '{"enabled": false, "member_config": [], "server_name": ""}' ;;
"config get local: "*) echo ;;
*) echo "fake incus: unexpected call: $*" >&2; exit 1 ;;
esac
`)
	env := []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
	for addr, want := range map[string]string{
		"192.0.2.10":        "192.0.2.10:8443",
		"192.0.2.10:9443":   "192.0.2.10:9443",
		"[2001:db8::10]":    "[2001:db8::10]:8443",
		"[2001:db8::10]:10": "[2001:db8::10]:10",
		"2001:db8::10":      "[2001:db8::10]:8443",
		"node-a.example":    "node-a.example:8443",
		"node-a.example:1":  "node-a.example:1",
	} {
		r := run(t, tok, env, "--address", addr, "--dry-run")
		r.expect(t, 0, "  server_address: '"+want+"'\n", "nothing was changed")
	}
	for _, addr := range []string{"::", "[::]:8443", "host:", "[2001:db8::10]:", "1.2.3", "01.2.3.4", "a..b", "-a.b", "192.0.2.10:0"} {
		r := run(t, tok, env, "--address", addr, "--dry-run")
		r.expect(t, 2, "--address '"+addr+"'")
	}
}

// TestMasksTheTokenInWhatIncusSays: the token reaches incus on standard input only, and if
// incus ever repeated it (this fake one echoes the preseed it was given into its error), the
// script masks it in what it prints. The fake also prints the CLI's first-run banner on
// standard error, which must not be read as a value.
func TestMasksTheTokenInWhatIncusSays(t *testing.T) {
	tok := syntheticToken(t, "node-a", time.Now().Add(3*time.Hour))
	dir := t.TempDir()
	calls, stdin := filepath.Join(dir, "calls.log"), filepath.Join(dir, "stdin.log")
	// Like the real CLI on a fresh server, it prints a first-run banner on standard error.
	tool(t, dir, "incus", fmt.Sprintf(`printf '%%s\n' "$*" >> '%s'
echo 'If this is your first time running Incus on this machine, you should also run: incus admin init' >&2
case "$*" in
"admin waitready --timeout 30") exit 0 ;;
"query local:/1.0/cluster") printf '{\n\t"enabled": false,\n\t"member_config": [],\n\t"server_name": ""\n}\n' ;;
"config get local: "*) echo ;;
"admin init --preseed")
	preseed=$(cat)
	printf '%%s\n' "$preseed" > '%s'
	printf 'Error: Failed to join cluster: bad preseed:\n%%s\n' "$preseed" >&2
	exit 1 ;;
*) echo "fake incus: unexpected call" >&2; exit 1 ;;
esac
`, calls, stdin))
	env := []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
	r := run(t, tok+"\n", env, "--address", "127.0.0.9", "--member-config", "storage-pool/local/source=/srv/it's here")
	r.expect(t, 3, "no --name given: joining as 'node-a'", "JOIN FAILED", "cluster_token: '<join token>'", "The join token is spent")
	neverShows(t, "the output", r.out, tok)
	got, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	neverShows(t, "incus's arguments", string(got), tok)
	preseed, err := os.ReadFile(stdin)
	if err != nil {
		t.Fatal(err)
	}
	want := "cluster:\n  enabled: true\n  server_name: 'node-a'\n  server_address: '127.0.0.9:8443'\n  cluster_token: '" + tok + "'\n" +
		"  member_config:\n  - entity: 'storage-pool'\n    name: 'local'\n    key: 'source'\n    value: '/srv/it''s here'\n"
	if string(preseed) != want {
		t.Errorf("incus got this preseed on standard input (token shown as <TOKEN>):\n%s\nwant:\n%s",
			strings.ReplaceAll(string(preseed), tok, "<TOKEN>"), strings.ReplaceAll(want, tok, "<TOKEN>"))
	}
}

// pty opens a pseudo-terminal pair.
func pty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var n uint32
	if err := ioctl(m, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		m.Close()
		t.Fatalf("TIOCGPTN: %v", err)
	}
	var unlock int32
	if err := ioctl(m, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		m.Close()
		t.Fatalf("TIOCSPTLCK: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open slave: %v", err)
	}
	return m, s
}

func ioctl(f *os.File, req uint, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// echoOn reports the ECHO flag of the terminal (a TCGETS on the master reads the slave's modes).
func echoOn(t *testing.T, master *os.File) bool {
	t.Helper()
	var tio syscall.Termios
	if err := ioctl(master, syscall.TCGETS, unsafe.Pointer(&tio)); err != nil {
		t.Fatalf("TCGETS: %v", err)
	}
	return tio.Lflag&syscall.ECHO != 0
}

// atTerminal runs the script on a pseudo-terminal (its controlling terminal), waits for the
// prompt, types input and returns everything the terminal showed and the exit status.
func atTerminal(t *testing.T, input string, env []string, args ...string) (shown string, code int, echoAfter bool) {
	t.Helper()
	master, slave := pty(t)
	defer master.Close()
	ctx, cancel := context.WithTimeout(context.Background(), runGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if !echoOn(t, master) {
		t.Fatal("a fresh terminal should echo")
	}
	if err := cmd.Start(); err != nil {
		slave.Close()
		t.Fatal(err)
	}
	slave.Close()

	prompted := make(chan struct{})
	done := make(chan string, 1)
	go func() {
		var seen bytes.Buffer
		buf := make([]byte, 4096)
		signalled := false
		for {
			n, err := master.Read(buf)
			seen.Write(buf[:n])
			if !signalled && bytes.Contains(seen.Bytes(), []byte("press Enter: ")) {
				signalled = true
				close(prompted)
			}
			if err != nil { // EIO once the script and its children have closed the terminal
				done <- seen.String()
				return
			}
		}
	}()
	select {
	case <-prompted:
	case shown := <-done:
		_ = cmd.Wait()
		t.Fatalf("the script ended without prompting for the token; the terminal showed:\n%s", printable(shown))
	case <-ctx.Done():
		t.Fatal("the script never prompted for the token")
	}
	if _, err := io.WriteString(master, input); err != nil {
		t.Fatal(err)
	}
	shown = <-done
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return shown, code, echoOn(t, master)
}

// TestPromptReadsTheTokenWithoutEcho: at a terminal the script prompts, reads the token with
// echo off (the terminal never shows it) and restores echo, also when interrupted.
func TestPromptReadsTheTokenWithoutEcho(t *testing.T) {
	tok := syntheticToken(t, "node-a", time.Now().Add(3*time.Hour))
	t.Run("typed token", func(t *testing.T) {
		env, calls := fakeIncus(t)
		// The token is for node-a, so the name check refuses it after reading: no Incus needed.
		shown, code, echo := atTerminal(t, tok+"\n", env, "--name", "node-b", "--address", "127.0.0.9")
		if code != 1 || !strings.Contains(shown, "issued for the member 'node-a', not 'node-b'") {
			t.Errorf("exit %d, terminal showed:\n%s", code, printable(shown))
		}
		neverShows(t, "the terminal", shown, tok)
		if !echo {
			t.Error("echo was not restored after the token was read")
		}
		if c := calls(); c != "" {
			t.Errorf("incus was called: %s", c)
		}
	})
	t.Run("interrupted at the prompt", func(t *testing.T) {
		env, calls := fakeIncus(t)
		shown, code, echo := atTerminal(t, tok[:30]+"\x03", env, "--name", "node-a", "--address", "127.0.0.9")
		if code != 130 || !strings.Contains(shown, "interrupted; nothing was changed on this server.") {
			t.Errorf("exit %d, terminal showed:\n%s", code, printable(shown))
		}
		if strings.Contains(shown, tok[:30]) {
			t.Errorf("the terminal echoed the partly typed token:\n%s", shown)
		}
		if !echo {
			t.Error("echo was not restored after the interrupt")
		}
		if c := calls(); c != "" {
			t.Errorf("incus was called: %s", c)
		}
	})
}

// clustered reads whether the daemon m is clustered and its https addresses.
func clustered(t *testing.T, c *incuslab.Cluster, m *incuslab.Member) (enabled bool, core, cluster string) {
	t.Helper()
	out, err := c.CLI(m, "query", "/1.0/cluster")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Enabled bool `json:"enabled"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("GET /1.0/cluster on %s: %v: %s", m.Name, err, out)
	}
	get := func(key string) string {
		v, err := c.CLI(m, "config", "get", key)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(v)
	}
	return st.Enabled, get("core.https_address"), get("cluster.https_address")
}

// untouched checks that daemon m is still an unconfigured, unclustered server.
func untouched(t *testing.T, c *incuslab.Cluster, m *incuslab.Member) {
	t.Helper()
	if enabled, core, cluster := clustered(t, c, m); enabled || core != "" || cluster != "" {
		t.Errorf("%s changed: clustered=%v core.https_address=%q cluster.https_address=%q", m.Name, enabled, core, cluster)
	}
}

// pending returns the operation id of the pending join token for name, or "".
func pending(t *testing.T, cl *incus.Client, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	toks, err := cl.PendingJoinTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range toks {
		if p.ServerName == name {
			return p.OperationID
		}
	}
	return ""
}

func member(t *testing.T, cl *incus.Client, name string) (incus.Member, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ms, err := cl.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ServerName == name {
			return m, true
		}
	}
	return incus.Member{}, false
}

// TestEnrolMemberWithRealIncus runs the script against real incusd daemons: a one-member
// cluster and fresh servers that join it. The steps share the lab and run in order.
func TestEnrolMemberWithRealIncus(t *testing.T) {
	began := time.Now()
	c := incuslab.Start(t, 1)
	m1 := c.Members[0]
	cl := c.Client(t, m1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	nodeX := c.StartUnjoined(t, "node-x")
	token := issue(t, ctx, cl, "node-x").Reveal()
	op := pending(t, cl, "node-x")
	if op == "" {
		t.Fatal("no pending token for node-x")
	}
	onX := c.Env(nodeX)
	args := []string{"--name", "node-x", "--address", nodeX.Address, "--member-config", "storage-pool/local/source="}
	t.Logf("lab and node-x up in %s", time.Since(began).Round(time.Millisecond))

	t.Run("refusals change nothing", func(t *testing.T) {
		expired := decodeToken(t, token)
		expired.ExpiresAt = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
		expiredToken := encodeToken(t, expired)
		cases := []struct {
			name  string
			stdin string
			env   []string
			args  []string
			code  int
			want  []string
		}{
			{"token as an argument", "", onX, append(slices.Clone(args), token), 2, []string{stdinOnly}},
			{"--token flag", token, onX, append(slices.Clone(args), "--token", token), 2, []string{stdinOnly}},
			{"garbage token", "garbage!", onX, args, 1, []string{"the join token is not valid"}},
			{"token for another name", token, onX, []string{"--name", "node-y", "--address", nodeX.Address}, 1, []string{"issued for the member 'node-x', not 'node-y'"}},
			{"expired token", expiredToken, onX, args, 1, []string{"this join token expired at"}},
			{"bad member config", token, onX, append(slices.Clone(args), "--member-config", "storage-pool/local"), 2, []string{"has no '='"}},
			{"missing --address", token, onX, []string{"--name", "node-x"}, 2, []string{"missing --address"}},
			{"daemon already clustered", token, c.Env(m1), []string{"--name", "node-x", "--address", "127.0.0.9:8443"}, 1,
				[]string{"already clustered, as the member 'm1'", "The join token was not used."}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				wrap, calls := wrapIncus(t, false)
				r := run(t, tc.stdin, append(slices.Clone(tc.env), wrap...), tc.args...)
				r.expect(t, tc.code, tc.want...)
				r.expect(t, tc.code, "Nothing was changed on this server.")
				neverShows(t, "the output", r.out, token)
				neverShows(t, "incus's arguments", calls(), token)
				if tc.name == "expired token" {
					if c := calls(); c != "" {
						t.Errorf("an expired token reached incus:\n%s", c)
					}
				}
			})
		}
		untouched(t, c, nodeX)
		if got := pending(t, cl, "node-x"); got != op {
			t.Errorf("the join token for node-x is no longer pending as operation %s (now %q)", op, got)
		}
		if _, ok := member(t, cl, "node-x"); ok {
			t.Error("node-x is a member after refusals")
		}
	})

	t.Run("dry run shows the preseed, masks the token, changes nothing", func(t *testing.T) {
		wrap, calls := wrapIncus(t, false)
		r := run(t, token+"\n", append(slices.Clone(onX), wrap...), append(slices.Clone(args), "--dry-run")...)
		r.expect(t, 0,
			"cluster:\n  enabled: true\n  server_name: 'node-x'\n  server_address: '"+nodeX.Address+"'\n  cluster_token: '<join token>'\n"+
				"  member_config:\n  - entity: 'storage-pool'\n    name: 'local'\n    key: 'source'\n    value: ''\n",
			"nothing was changed, and the join token was not used")
		neverShows(t, "the output", r.out, token)
		if c := calls(); strings.Contains(c, "admin init") || strings.Contains(c, "cluster set") || strings.Contains(c, "config set") {
			t.Errorf("the dry run changed something:\n%s", c)
		}
		untouched(t, c, nodeX)
		if got := pending(t, cl, "node-x"); got != op {
			t.Errorf("the dry run spent or replaced the token (pending operation %q, want %s)", got, op)
		}
	})

	t.Run("joins and holds itself", func(t *testing.T) {
		wrap, calls := wrapIncus(t, false)
		start := time.Now()
		r := run(t, token+"\n", append(slices.Clone(onX), wrap...), args...)
		t.Logf("join and hold took %s", time.Since(start).Round(time.Millisecond))
		r.expect(t, 0, "joined the cluster as node-x at "+nodeX.Address+"; held out of automatic placement (scheduler.instance=manual); next: run the admission checks in Apelora")
		c.AddMember(nodeX)
		neverShows(t, "the output", r.out, token)
		for _, a := range r.args {
			if strings.Contains(a, token) || strings.Contains(a, decodeToken(t, token).Secret) {
				t.Errorf("the script's argv holds the token: %q", r.args)
			}
		}
		got := calls()
		neverShows(t, "incus's arguments", got, token)
		for _, want := range []string{"admin init --preseed\n", "cluster set local:node-x scheduler.instance=manual\n", "cluster get local:node-x scheduler.instance\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("incus was not called with %q; calls:\n%s", want, got)
			}
		}

		m, ok := member(t, cl, "node-x")
		if !ok {
			t.Fatal("node-x is not a cluster member")
		}
		if m.Status != incus.MemberOnline {
			t.Errorf("node-x is %s (%s), want Online", m.Status, m.Message)
		}
		if m.Config["scheduler.instance"] != "manual" {
			t.Errorf("node-x config %v, want scheduler.instance=manual", m.Config)
		}
		if m.URL != "https://"+nodeX.Address {
			t.Errorf("node-x URL %q, want https://%s", m.URL, nodeX.Address)
		}
		if _, err := cl.StoragePool(ctx, "local", "node-x"); err != nil {
			t.Errorf("pool local on node-x: %v", err)
		}
		if p := pending(t, cl, "node-x"); p != "" {
			t.Errorf("the token for node-x is still pending (%s) after the join", p)
		}
	})

	t.Run("run again on the joined server", func(t *testing.T) {
		r := run(t, token, onX, args...)
		r.expect(t, 1, "already clustered, as the member 'node-x': there is nothing to join", "incus cluster get local:node-x scheduler.instance")
		neverShows(t, "the output", r.out, token)
	})

	nodeY := c.StartUnjoined(t, "node-y")
	onY := c.Env(nodeY)
	argsY := []string{"--name", "node-y", "--address", nodeY.Address, "--member-config", "storage-pool/local/source="}

	t.Run("revoked token: the join fails loudly, the server is as before", func(t *testing.T) {
		revoked := issue(t, ctx, cl, "node-y")
		if err := cl.RevokeJoinToken(ctx, "node-y"); err != nil {
			t.Fatal(err)
		}
		r := run(t, revoked.Reveal(), onY, argsY...)
		r.expect(t, 3, "JOIN FAILED", "No matching cluster join operation found",
			"The join token is spent", "approve the enrolment again for a new token",
			"its address settings (core.https_address, cluster.https_address) are as they were before")
		neverShows(t, "the output", r.out, revoked.Reveal())
		untouched(t, c, nodeY)
		if _, ok := member(t, cl, "node-y"); ok {
			t.Error("node-y is a member after a failed join")
		}
	})

	// A token whose fingerprint is not the cluster's: the CLI stops before presenting it.
	tokY := issue(t, ctx, cl, "node-y")
	opY := pending(t, cl, "node-y")

	t.Run("wrong fingerprint: the join fails before the token is presented", func(t *testing.T) {
		bad := decodeToken(t, tokY.Reveal())
		bad.Fingerprint = strings.Repeat("0", len(bad.Fingerprint))
		badToken := encodeToken(t, bad)
		r := run(t, badToken, onY, argsY...)
		r.expect(t, 3, "JOIN FAILED", "Certificate fingerprint mismatch", "approve the enrolment again for a new one")
		neverShows(t, "the output", r.out, badToken)
		neverShows(t, "the output", r.out, tokY.Reveal())
		untouched(t, c, nodeY)
		if got := pending(t, cl, "node-y"); got != opY {
			t.Errorf("the real token for node-y is no longer pending (%q, want %s)", got, opY)
		}
	})

	t.Run("hold fails: joined but not held, loudly", func(t *testing.T) {
		// The real token, unspent by the fingerprint failure, still joins.
		wrap, _ := wrapIncus(t, true)
		r := run(t, tokY.Reveal(), append(slices.Clone(onY), wrap...), argsY...)
		r.expect(t, 4, "JOINED BUT IS NOT HELD", "simulated failure to set the hold",
			"    incus cluster set local:node-y scheduler.instance=manual\n")
		if strings.Contains(r.out, "held out of automatic placement (scheduler") {
			t.Errorf("the script claims a hold it did not set:\n%s", r.out)
		}
		c.AddMember(nodeY)
		neverShows(t, "the output", r.out, tokY.Reveal())
		m, ok := member(t, cl, "node-y")
		if !ok {
			t.Fatal("node-y did not join")
		}
		if v, set := m.Config["scheduler.instance"]; set {
			t.Errorf("node-y has scheduler.instance=%q, but every hold attempt failed", v)
		}
	})
	t.Logf("whole test %s", time.Since(began).Round(time.Millisecond))
}
