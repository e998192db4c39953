package fabric_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The layers of docs/ARCHITECTURE.md, from the top, by folder: the folder a package is in
// says its layer. A package imports packages of its own layer or of layers below it, never
// above: the import graph reads one way. Adapters sit just above the domain because they
// implement the domain's ports: an adapter imports the domain's interfaces and types, the
// domain never imports an adapter.
var layers = []struct {
	name string
	has  func(rel string) bool
}{
	{"entry", func(p string) bool {
		return p == "." || p == "e2e" || p == "bench" || p == "docs" || under(p, "cmd") || under(p, "testkit") || p == "internal/architecture"
	}},
	{"wiring", func(p string) bool { return under(p, "internal/app") }},
	{"server", func(p string) bool { return under(p, "internal/server") }},
	{"resolvers", func(p string) bool { return p == "resolvers" }},
	{"api", func(p string) bool { return under(p, "graph") || p == "client" }},
	{"adapter", func(p string) bool { return under(p, "adapters") }},
	{"domain", func(p string) bool { return under(p, "domain") }},
	{"leaf", func(p string) bool {
		return under(p, "internal") || p == "migrations" || p == "scripts" || under(p, "web")
	}},
}

// rootEntries are the tracked entries the repository's root may hold: the layers above as
// folders, and the files every Go module and its tools need at the top.
const maxRootEntries = 24

// shipped are the binaries installed on servers: they must not link a test harness.
var shipped = []string{"cmd/apelora", "cmd/apelora-worker", "cmd/apeloractl"}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

type goPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

const module = "github.com/apelora/fabric"

// TestMain runs the tests from the module's root, where go list, git and the docs' paths
// start.
func TestMain(m *testing.M) {
	dir, err := os.Getwd()
	for err == nil {
		if _, statErr := os.Stat(filepath.Join(dir, "go.mod")); statErr == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			err = errors.New("no go.mod above the test's folder")
			break
		}
		dir = parent
	}
	if err == nil {
		err = os.Chdir(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "architecture tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// listPackages runs go list over the module.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Imports,TestImports,XTestImports,Deps", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; run the test from the repository", len(pkgs))
	}
	return pkgs
}

// layerOf returns the index of rel's layer in layers (0 is the top), or -1.
func layerOf(rel string) int {
	for i, l := range layers {
		if l.has(rel) {
			return i
		}
	}
	return -1
}

// TestImportsGoOneWay fails on any import that goes up a layer, for each package's own
// code and its in-package tests (package foo). An external test (package foo_test) is a
// client of its package from outside, like e2e: it sits at the top and may use testkit.
func TestImportsGoOneWay(t *testing.T) {
	edges, ups := 0, 0
	for _, p := range listPackages(t) {
		from, _ := rel(p.ImportPath)
		fl := layerOf(from)
		if fl < 0 {
			t.Errorf("package %s is in no layer: add it to layers here and to docs/ARCHITECTURE.md", from)
			continue
		}
		check := func(kind string, imports []string) {
			for _, imp := range imports {
				to, ours := rel(imp)
				if !ours || to == from {
					continue
				}
				edges++
				if tl := layerOf(to); tl >= 0 && tl < fl { // a package in no layer is reported on its own
					ups++
					t.Errorf("%s (%s) imports %s (%s)%s: it goes up a layer; move the code, or turn the call around with an interface declared below",
						from, layers[fl].name, to, layers[tl].name, kind)
				}
			}
		}
		check("", p.Imports)
		check(" in its tests", p.TestImports)
	}
	t.Logf("%d imports between the module's packages (code and in-package tests), %d going up", edges, ups)
}

// TestShippedBinariesLinkNoHarness: what is installed on servers carries no test code.
func TestShippedBinariesLinkNoHarness(t *testing.T) {
	pkgs := map[string]goPackage{}
	for _, p := range listPackages(t) {
		r, _ := rel(p.ImportPath)
		pkgs[r] = p
	}
	for _, bin := range shipped {
		p, ok := pkgs[bin]
		if !ok {
			t.Errorf("shipped binary %s is not a package", bin)
			continue
		}
		for _, d := range p.Deps {
			r, ours := rel(d)
			if d == "testing" || ours && (under(r, "testkit") || under(r, "adapters/maas/sim") || r == "adapters/postgres/pgtest" || r == "internal/apperr/apperrtest") {
				t.Errorf("%s links %s, a test harness", bin, d)
			}
		}
	}
}

// TestArchitectureListsEveryPackage: docs/ARCHITECTURE.md's package table names every
// package of the module, in the layer this test puts it in, and nothing that is gone.
func TestArchitectureListsEveryPackage(t *testing.T) {
	f, err := os.Open("docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	documented := map[string]string{} // package → layer
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inTable = line == "## Packages"
			continue
		}
		if !inTable || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Errorf("docs/ARCHITECTURE.md: package row %q has no layer column", line)
			continue
		}
		pkg := strings.Trim(strings.TrimSpace(cells[1]), "`")
		documented[pkg] = strings.TrimSpace(cells[2])
	}
	if len(documented) == 0 {
		t.Fatal("docs/ARCHITECTURE.md has no \"## Packages\" table of | `package` | layer | what |")
	}
	var missing []string
	for _, p := range listPackages(t) {
		r, _ := rel(p.ImportPath)
		l := layerOf(r)
		doc, ok := documented[r]
		delete(documented, r)
		switch {
		case !ok:
			missing = append(missing, r)
		case l >= 0 && doc != layers[l].name:
			t.Errorf("docs/ARCHITECTURE.md puts %s in layer %q; it is in %q", r, doc, layers[l].name)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("package %s is missing from docs/ARCHITECTURE.md's package table", m)
	}
	for p := range documented {
		t.Errorf("docs/ARCHITECTURE.md lists %s, which is not a package of the module", p)
	}
}

// TestDocsPointInsideTheRepository: every file docs/ names by a path in its text (a path from
// the repository's root, such as internal/app/wiring.go) is a file of the repository, so a newcomer
// can follow each reference from a clone. Markdown links are relative to their document and
// are checked by TestMarkdownLinksResolve.
func TestDocsPointInsideTheRepository(t *testing.T) {
	var docs []string
	err := filepath.WalkDir("docs", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return err
	})
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	linkTarget := regexp.MustCompile(`\]\([^)\s]*\)`)
	httpRoute := regexp.MustCompile("(\\b(GET|POST|PUT|PATCH|DELETE)|served at) `?$")
	path := regexp.MustCompile(`[A-Za-z0-9_./-]*/[A-Za-z0-9_.-]+\.(md|go|sh|sql|graphqls|graphql)\b`)
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := linkTarget.ReplaceAllString(string(raw), "]()")
		for _, at := range path.FindAllStringIndex(text, -1) {
			p := text[at[0]:at[1]]
			if at[1] < len(text) && (text[at[1]] == '.' && at[1]+1 < len(text) && isWordByte(text[at[1]+1])) {
				continue // a longer name, such as configuration.md.tmpl: the pattern saw its start
			}
			if httpRoute.MatchString(text[:at[0]]) {
				continue // an HTTP route the server serves, such as GET /enrol/enrol-member.sh
			}
			if filepath.IsAbs(p) || strings.HasPrefix(p, "..") {
				t.Errorf("%s points outside the repository: %s", doc, p)
			} else if _, err := os.Stat(p); err != nil {
				t.Errorf("%s names %s, which is not in the repository", doc, p)
			}
		}
	}
}

func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// TestTheRootShowsTheLayers: the repository's root holds the layers as folders and the
// files a Go module needs, at most maxRootEntries tracked entries, and no package of the
// domain: a newcomer sees the house's layout in one look.
func TestTheRootShowsTheLayers(t *testing.T) {
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	entries := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		top, _, _ := strings.Cut(f, "/")
		entries[top] = true
	}
	if len(entries) > maxRootEntries {
		names := slices.Sorted(maps.Keys(entries))
		t.Errorf("the root holds %d tracked entries, more than %d: %s", len(entries), maxRootEntries, strings.Join(names, " "))
	}
	for _, p := range listPackages(t) {
		r, _ := rel(p.ImportPath)
		if l := layerOf(r); l >= 0 && layers[l].name == "domain" && !under(r, "domain") {
			t.Errorf("domain package %s is not under domain/", r)
		}
		if r != "." && !strings.Contains(r, "/") && entries[r] && layerOf(r) < 0 {
			t.Errorf("package %s at the root is in no layer", r)
		}
	}
}
