package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// repoRoot is the repository's root, relative to this package.
const repoRoot = ".."

// example is a code block of a markdown file marked runnable.
type example struct {
	file string // the markdown file, from the repository's root
	line int    // the marker's line, from 1
	kind string // "sh" or "graphql"
	text string // the block, its indentation removed
}

var runnableMarker = regexp.MustCompile(`^<!-- runnable(?:: ([a-z]+))? -->$`)

// markdownFiles lists the repository's tracked markdown files, README.md first, then the
// others in git's order (by path). Outside a git checkout it walks the tree instead.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	cmd := exec.Command("git", "ls-files", "-z", "--", "*.md")
	cmd.Dir = repoRoot
	if out, err := cmd.Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
	} else {
		err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".md") {
				rel, _ := filepath.Rel(repoRoot, path)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.SortStableFunc(files, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "README.md":
			return -1
		case b == "README.md":
			return 1
		}
		return strings.Compare(a, b)
	})
	if len(files) == 0 || files[0] != "README.md" {
		t.Fatalf("no README.md among the markdown files %v", files)
	}
	return files
}

// runnableExamples are the code blocks of every tracked markdown file marked
// `<!-- runnable -->` (a shell block) or `<!-- runnable: graphql -->`: the block after the
// marker, indented four spaces more than the marker (as a list item's block is) or fenced
// with ```. README.md's come first, then the other files' by path, each in its order.
func runnableExamples(t *testing.T) []example {
	t.Helper()
	var out []example
	for _, f := range markdownFiles(t) {
		raw, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, examplesIn(t, f, string(raw))...)
	}
	return out
}

// examplesIn reads the runnable examples of one markdown file.
func examplesIn(t *testing.T, file, raw string) []example {
	t.Helper()
	lines := strings.Split(raw, "\n")
	var out []example
	for i, l := range lines {
		m := runnableMarker.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			if strings.HasPrefix(strings.TrimSpace(l), "<!-- runnable") {
				t.Fatalf("%s:%d: a runnable marker this test does not read: %q", file, i+1, l)
			}
			continue
		}
		ex := example{file: file, line: i + 1, kind: m[1]}
		if ex.kind == "" {
			ex.kind = "sh"
		}
		if ex.kind != "sh" && ex.kind != "graphql" {
			t.Fatalf("%s:%d: runnable: %s is neither sh nor graphql", file, i+1, ex.kind)
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		var block []string
		if j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "```") {
			fence := len(lines[j]) - len(strings.TrimLeft(lines[j], " "))
			for j++; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```"); j++ {
				block = append(block, strings.TrimPrefix(lines[j], strings.Repeat(" ", fence)))
			}
		} else {
			code := strings.Repeat(" ", indent+4)
			for ; j < len(lines) && (strings.HasPrefix(lines[j], code) || strings.TrimSpace(lines[j]) == ""); j++ {
				block = append(block, strings.TrimPrefix(lines[j], code))
			}
		}
		ex.text = strings.TrimSpace(strings.Join(block, "\n"))
		if ex.text == "" {
			t.Fatalf("%s:%d: a runnable marker without a code block after it", file, i+1)
		}
		out = append(out, ex)
	}
	return out
}

// operations splits a GraphQL block into its operations: each starts at the beginning of
// a line with query, mutation, subscription or {; its other lines are indented.
func operations(text string) []string {
	var ops []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "query") || strings.HasPrefix(l, "mutation") || strings.HasPrefix(l, "subscription") || strings.HasPrefix(l, "{") || len(ops) == 0 {
			ops = append(ops, l)
		} else {
			ops[len(ops)-1] += "\n" + l
		}
	}
	return ops
}

// TestRunnableExamplesAreFound reads the markers without running anything, so a marker
// that lost its block, or one in a form the runner does not read, fails without a lab.
func TestRunnableExamplesAreFound(t *testing.T) {
	parallel(t)
	where := map[string]int{}
	for _, ex := range runnableExamples(t) {
		where[ex.file+" "+ex.kind]++
	}
	t.Logf("runnable examples: %v", where)
}

// TestREADMEExamplesRunAsPrinted runs every example the documentation marks runnable
// (README.md's, then every other tracked markdown file's: runnableExamples), as printed, in
// that order, against the product as scripts/run.sh starts it: a real
// server on a real Incus lab and the MAAS simulator over TLS with run.sh's fixture, an
// administrator's token in APELORA_TOKEN, APELORA_URL set, bin/apelora and bin/apeloractl
// built from this tree (and on PATH), the server's database in APELORA_DATABASE_URL. The
// one fact the examples take as given: node-7 is a registered machine. A shell block runs
// under bash -euo pipefail and must exit 0; each query and mutation of a GraphQL block is
// sent and must answer without an error; a subscription is checked against the schema the
// server serves (one that pushes only when something happens would wait forever here).
// Then what the examples say they do is checked.
func TestREADMEExamplesRunAsPrinted(t *testing.T) {
	parallel(t)
	examples := runnableExamples(t)
	kinds := map[string]int{}
	for _, ex := range examples {
		kinds[ex.kind]++
	}
	if kinds["sh"] < 2 || kinds["graphql"] < 2 {
		t.Fatalf("found %v runnable examples in the markdown files: the markers were lost?", kinds)
	}
	for _, tool := range []string{"bash", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing (scripts/install-deps.sh installs it)", tool)
			}
			t.Skipf("SKIPPED: %s is missing (scripts/install-deps.sh installs it)", tool)
		}
	}

	lab := incuslab.Start(t, 1)
	fixture, err := sim.LoadFixture("../cmd/maas-sim/testdata/fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	m := producttest.StartMAAS(t, fixture)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure, identity.HardwareDelete)
	e.MustGQL(admin, `mutation { registerMachine(input: {name: "node-7"}) { machine { name } } }`, nil)

	// The examples run bin/apelora as a checkout has it: the commands as built once for the
	// whole run (buildCommand), linked there.
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"apelora", "apeloractl"} {
		if err := os.Symlink(buildCommand(t, "github.com/apelora/fabric/cmd/"+cmd), filepath.Join(bin, cmd)); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "APELORA_URL="+e.Base, "APELORA_TOKEN="+admin,
		"APELORA_DATABASE_URL="+e.DB.URL, "APELORA_STATE_DIR="+filepath.Join(work, "state"))
	schema := loadSchema(t)

	for _, ex := range examples {
		where := fmt.Sprintf("%s:%d (%s)", ex.file, ex.line, ex.kind)
		switch ex.kind {
		case "sh":
			cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", ex.text)
			cmd.Dir, cmd.Env = work, env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n$ %s\n%s", where, err, ex.text, out)
			}
			t.Logf("%s:\n$ %s\n%s", where, ex.text, out)
		case "graphql":
			for _, op := range operations(ex.text) {
				if strings.HasPrefix(op, "subscription") {
					if _, errs := gqlparser.LoadQuery(schema, op); errs != nil {
						t.Errorf("%s: %s\n%v", where, op, errs)
					}
					continue
				}
				if r := e.GQL(admin, op, nil); len(r.Errors) > 0 {
					t.Errorf("%s: %s\n%+v", where, op, r.Errors)
				}
			}
		}
	}

	// What the examples say they did.
	ids := e.MustGQL(admin, `{ identities { name permissions expiresAt } }`, nil)
	if a, _ := byKey(ids["identities"], "name", "alice").(map[string]any); a == nil || a["expiresAt"] == nil {
		t.Errorf("the identity example made no alice expiring: %v", ids)
	}
	if p := e.MustGQL(admin, `{ machine(name: "node-7") { hardwareProfile { name } } }`, nil); fmt.Sprint(p) != "map[machine:map[hardwareProfile:map[name:gen2]]]" {
		t.Errorf("the hardware profile example: %v", p)
	}
	d := e.MustGQL(admin, `{ fleet { machines { name phase maas { status } } } }`, nil)
	got := map[string]string{}
	for _, row := range d["fleet"].(map[string]any)["machines"].([]any) {
		r := row.(map[string]any)
		status := "-"
		if mm, ok := r["maas"].(map[string]any); ok {
			status = mm["status"].(string)
		}
		got[r["name"].(string)] = fmt.Sprintf("%s/%s", r["phase"], status)
	}
	// The bulk example: the New and Ready machines registered and commissioning; the
	// Deployed ones left as they were.
	want := map[string]string{
		"rack3-node07": "REGISTERED/Commissioning", "rack3-node09": "REGISTERED/Commissioning",
		"rack3-node08": "DISCOVERED/Deployed", "rack3-node10": "DISCOVERED/Deployed",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s is %s after the bulk example, want %s (fleet: %v)", name, got[name], w, got)
		}
	}
}
