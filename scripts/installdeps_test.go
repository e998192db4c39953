//go:build linux

package scripts_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goLine is go.mod's go line: the Go the plan must name.
func goLine(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// planDeps runs install-deps.sh SET --plan with PATH and returns what it printed; the
// plan installs nothing and writes no log.
func planDeps(t *testing.T, set, path string) string {
	t.Helper()
	if _, err := exec.LookPath("apt-cache"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("apt-cache is missing: install-deps.sh runs on Debian")
		}
		t.Skip("SKIPPED: not a Debian machine (no apt-cache)")
	}
	logFile := filepath.Join(t.TempDir(), "install.log")
	cmd := exec.Command("bash", "install-deps.sh", set, "--plan")
	cmd.Env = []string{"PATH=" + path, "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8", "APELORA_INSTALL_LOG=" + logFile}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("install-deps.sh %s --plan: %v\n%s", set, err, out.String())
	}
	if _, err := os.Stat(logFile); err == nil {
		t.Errorf("install-deps.sh --plan wrote %s", logFile)
	}
	return out.String()
}

// Without Go on PATH, the run set plans Debian's golang-go from bookworm-backports, which
// fetches go.mod's Go through the module proxy; with the Go that built this test, it
// plans nothing for Go (or the fetch, for an older one). One line per step.
func TestInstallDepsPlansGoWhenItIsMissing(t *testing.T) {
	want := goLine(t)
	var noGo []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			if dir == "/usr/bin" || dir == "/bin" {
				t.Skipf("SKIPPED: %s/go is installed, so no PATH with the system's tools lacks Go", dir)
			}
			continue
		}
		noGo = append(noGo, dir)
	}
	out := planDeps(t, "run", strings.Join(noGo, ":"))
	line := regexp.MustCompile(`(?m)^install-deps: Go \(Go is not installed; golang-go (\S+) fetches go` + regexp.QuoteMeta(want) +
		`, go\.mod's, through the Go module proxy\): would install golang-go from bookworm-backports$`)
	if !line.MatchString(out) {
		t.Fatalf("without Go, the plan says:\n%s", out)
	}
	if strings.Count(out, "Go") != strings.Count(line.FindString(out), "Go") {
		t.Errorf("more than one line about Go:\n%s", out)
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIPPED: no go on PATH")
	}
	out = planDeps(t, "run", filepath.Dir(goBin)+":"+strings.Join(noGo, ":"))
	if !regexp.MustCompile(`(?m)^install-deps: Go: Go \S+ (builds go\.mod's ` + regexp.QuoteMeta(want) + `: nothing to install|would fetch go` +
		regexp.QuoteMeta(want) + ` \(go\.mod's\) through the Go module proxy on first use)$`).MatchString(out) {
		t.Fatalf("with %s, the plan says:\n%s", goBin, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "install-deps: ") {
			t.Errorf("a line that is not one step's: %q", l)
		}
	}
}
