// Package docs_test checks the repository's documents: every link resolves, every error
// code is listed.
package docs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"

	"github.com/apelora/fabric/internal/apperr"
)

// TestMain runs the tests from the repository's root, where the documents' links start.
func TestMain(m *testing.M) {
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, "docs tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// trackedFiles lists the repository's tracked files (git ls-files), or, outside a git
// checkout, every file under the root but .git and node_modules.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "ls-files", "-z").Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestMarkdownLinksResolve: every relative link in every tracked markdown file leads to a
// tracked file or folder of the repository, and every #anchor to a heading of the target
// (as GitHub names headings), so a reader who follows one lands where it says.
func TestMarkdownLinksResolve(t *testing.T) {
	files := trackedFiles(t)
	links := 0
	for _, p := range linkProblems(os.DirFS("."), files, &links) {
		t.Error(p)
	}
	if links < 50 {
		t.Errorf("checked only %d relative links: the markdown files were not found or not read", links)
	}
	t.Logf("%d relative links resolve", links)
}

// TestLinkCheckerCatchesBrokenLinks feeds the checker a small repository with every kind of
// link it must refuse, and the kinds it must accept.
func TestLinkCheckerCatchesBrokenLinks(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte("# Top\n\n" +
			"[ok](docs/a.md) [ok](docs/a.md#a-heading-with-code) [ok](#top) [ok](docs/) [ok](docs)\n" +
			"[ok](https://example.com/x.md) [ok](mailto:a@example.com) [ok](docs/a.md#second-1)\n" +
			"[ok](scripts/run.sh#L3) ![ok](docs/pic.png) [ok](docs/a.md \"a title\") [ok](</docs/a.md>)\n" +
			"`[not a link](nowhere.md)`\n\n```\n[not a link](nowhere.md)\n```\n" +
			"[missing](docs/gone.md) [no anchor](docs/a.md#nope) [no anchor here](#nope)\n" +
			"[outside](../x.md) [untracked](bin/apelora) [anchor in a picture](docs/pic.png#x)\n" +
			"[ref]: docs/also-gone.md\n")},
		"docs/a.md":      {Data: []byte("# A heading with `code`\n\n## Second\n\n## Second\n")},
		"docs/pic.png":   {Data: []byte("png")},
		"scripts/run.sh": {Data: []byte("#!/bin/sh\n")},
		"bin/apelora":    {Data: []byte("untracked")},
	}
	tracked := []string{"README.md", "docs/a.md", "docs/pic.png", "scripts/run.sh"}
	links := 0
	got := linkProblems(fsys, tracked, &links)
	want := []string{
		"README.md:11: docs/gone.md: no such file in the repository",
		"README.md:11: docs/a.md#nope: docs/a.md has no heading #nope",
		"README.md:11: #nope: README.md has no heading #nope",
		"README.md:12: ../x.md: points outside the repository",
		"README.md:12: bin/apelora: no such file in the repository",
		"README.md:12: docs/pic.png#x: an anchor into docs/pic.png, which is not markdown",
		"README.md:13: docs/also-gone.md: no such file in the repository",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if links != 17 {
		t.Errorf("checked %d relative links, want 17", links)
	}
}

// TestGitHubHeadingAnchors: headings are named as GitHub names them (github-slugger):
// lower case, punctuation dropped, each space a hyphen, repeats numbered.
func TestGitHubHeadingAnchors(t *testing.T) {
	for heading, want := range map[string]string{
		"Maintenance: evacuate and restore":                          "maintenance-evacuate-and-restore",
		"When the trail cannot be trusted: changes stop only when …": "when-the-trail-cannot-be-trusted-changes-stop-only-when-",
		"`APELORA_WORKER_NAME` and **bold** [a link](x.md)":          "apelora_worker_name-and-bold-a-link",
		"Upgrades & backups":                                         "upgrades--backups",
		"What's new? (v2.0)":                                         "whats-new-v20",
		"Straße über Ölfelder":                                       "straße-über-ölfelder",
		"Subscribers on admissionChecks":                             "subscribers-on-admissionchecks",
		"apelora-worker":                                             "apelora-worker",
	} {
		if got := headingAnchor(heading); got != want {
			t.Errorf("%q: %q, want %q", heading, got, want)
		}
	}
	got := anchorsOf([]byte("# A\n\n## A\n\n```\n# not a heading\n```\n\n### A ###\n<a name=\"custom\"></a>\n"))
	for _, a := range []string{"a", "a-1", "a-2", "custom"} {
		if !got[a] {
			t.Errorf("anchors %v lack %q", got, a)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a line in a code block became a heading: %v", got)
	}
}

var (
	inlineLink  = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+"[^"]*")?\s*\)`)
	refLink     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlLink    = regexp.MustCompile(`<(?:a|img)\s[^>]*(?:href|src)="([^"]*)"`)
	codeSpan    = regexp.MustCompile("`+[^`]*`+")
	scheme      = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	lineAnchor  = regexp.MustCompile(`^L\d+(-L\d+)?$`)
	atxHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	imageOrLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag     = regexp.MustCompile(`<[^>]+>`)
)

// linkProblems checks the relative links of the markdown files among tracked (paths from
// the root of fsys) and counts them in *links.
func linkProblems(fsys fs.FS, tracked []string, links *int) []string {
	isFile := map[string]bool{}
	isDir := map[string]bool{".": true}
	for _, f := range tracked {
		isFile[f] = true
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			isDir[d] = true
		}
	}
	anchors := map[string]map[string]bool{}
	anchorsIn := func(f string) map[string]bool {
		if a, ok := anchors[f]; ok {
			return a
		}
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			raw = nil
		}
		anchors[f] = anchorsOf(raw)
		return anchors[f]
	}
	var problems []string
	for _, f := range tracked {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		for _, l := range linksIn(raw) {
			target := strings.Trim(l.target, "<>")
			if target == "" || scheme.MatchString(target) || strings.HasPrefix(target, "//") {
				continue
			}
			*links++
			say := func(format string, args ...any) {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", f, l.line, l.target, fmt.Sprintf(format, args...)))
			}
			p, anchor, _ := strings.Cut(target, "#")
			if u, err := url.PathUnescape(p); err == nil {
				p = u
			}
			var to string
			switch {
			case p == "":
				to = f
			case strings.HasPrefix(p, "/"): // GitHub reads it from the repository's root
				to = path.Clean(strings.TrimPrefix(p, "/"))
			default:
				to = path.Join(path.Dir(f), p)
			}
			if to == ".." || strings.HasPrefix(to, "../") {
				say("points outside the repository")
				continue
			}
			if isDir[to] && !isFile[to] {
				if anchor == "" {
					continue
				}
				to = path.Join(to, "README.md") // GitHub shows a folder's README
			}
			if !isFile[to] {
				say("no such file in the repository")
				continue
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(to, ".md") {
				if !lineAnchor.MatchString(anchor) {
					say("an anchor into %s, which is not markdown", to)
				}
				continue
			}
			if !anchorsIn(to)[anchor] {
				say("%s has no heading #%s", to, anchor)
			}
		}
	}
	return problems
}

type link struct {
	line   int
	target string
}

// linksIn returns the links of a markdown file outside code blocks and code spans.
func linksIn(raw []byte) []link {
	var out []link
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{n, m[1]})
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			out = append(out, link{n, m[1]})
		}
		for _, m := range htmlLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{n, m[1]})
		}
	}
	return out
}

// anchorsOf returns the anchors GitHub makes for a markdown file's headings (ATX headings
// outside fenced code), repeats numbered -1, -2, …, and its explicit <a name|id> anchors.
func anchorsOf(raw []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := headingAnchor(m[2])
		if n, ok := seen[a]; ok {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n+1)
		} else {
			seen[a] = 0
		}
		out[a] = true
	}
	return out
}

// headingAnchor is GitHub's anchor for a heading's text: the text as rendered (links and
// images by their text, code and emphasis marks dropped), in lower case, keeping letters,
// marks, numbers, '-' and '_', each space turned into '-'.
func headingAnchor(heading string) string {
	text := imageOrLink.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	text = strings.NewReplacer("`", "", "*", "", `\`, "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestAPIDocListsEveryErrorCode: docs/api.md's Error codes table names exactly the codes
// the API answers with (apperr.Codes), in their order.
func TestAPIDocListsEveryErrorCode(t *testing.T) {
	raw, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(raw)
	start := strings.Index(section, "\n## Error codes\n")
	if start < 0 {
		t.Fatal(`docs/api.md has no "## Error codes" section`)
	}
	section = section[start+1:]
	if end := strings.Index(section[1:], "\n#"); end >= 0 {
		section = section[:end+1]
	}
	var documented []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| ") || strings.TrimSpace(cells[1]) == "code" {
			continue
		}
		for _, c := range strings.Split(cells[1], ",") {
			documented = append(documented, strings.TrimSpace(c))
		}
	}
	var codes []string
	for _, c := range apperr.Codes {
		codes = append(codes, string(c))
	}
	if !slices.Equal(documented, codes) {
		t.Errorf("docs/api.md's Error codes table lists %v; the API answers with %v (apperr.Codes), in that order", documented, codes)
	}
}
