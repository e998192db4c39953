package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/mutations"
)

// The commands and the declared mutations (schema/, @change, generated into
// internal/mutations by go generate) are held to each other: a declared mutation without a
// command that calls it, a command naming a mutation that is not declared, and a file that
// calls a mutation none of its commands declares all fail here. A command with a mutation
// takes -dry-run and -plan-hash (change.go), so a new change cannot forget them.
func TestEveryMutationHasItsCommand(t *testing.T) {
	declaredBy := map[string][]string{} // mutation → the commands that declare it
	for _, top := range commandTable {
		for _, c := range append([]*command{top}, top.subs...) {
			if c.mutation == "" {
				continue
			}
			path := top.name
			if c != top {
				path += " " + c.name
			}
			if _, ok := mutations.Of(c.mutation); !ok {
				t.Errorf("command %q names the mutation %q, which schema/ does not declare (@change)", path, c.mutation)
			}
			declaredBy[c.mutation] = append(declaredBy[c.mutation], path)
		}
	}
	for _, m := range mutations.All() {
		if len(declaredBy[m.Name]) == 0 {
			t.Errorf("the mutation %s (schema/, @change) has no apeloractl command: declare one in the file of its resource (commands.go lists them)", m.Name)
		}
	}

	// What each file declares is what it calls: the command's mutation is the one its
	// code sends, and a call is never made outside a command that declares it (bulk calls
	// the mutations of its steps' commands).
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`client\.([A-Z]\w*)\(ctx`)
	decl := regexp.MustCompile(`mutation:\s*"(\w+)"`)
	var bulkMutations []string
	for _, s := range bulkSteps {
		if c := commandNamed(s); c == nil || c.mutation == "" {
			t.Errorf("bulk step %s is no command that makes a change", s)
		} else {
			bulkMutations = append(bulkMutations, c.mutation)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		var called, declared []string
		for _, m := range call.FindAllStringSubmatch(src, -1) {
			name := strings.ToLower(m[1][:1]) + m[1][1:]
			if _, ok := mutations.Of(name); ok && !slices.Contains(called, name) {
				called = append(called, name)
			}
		}
		for _, m := range decl.FindAllStringSubmatch(src, -1) {
			declared = append(declared, m[1])
		}
		for _, m := range declared {
			if !slices.Contains(called, m) {
				t.Errorf("%s declares a command for the mutation %s but never calls it", f, m)
			}
		}
		allowed := declared
		if f == "bulk.go" {
			allowed = bulkMutations
		}
		for _, m := range called {
			if !slices.Contains(allowed, m) {
				t.Errorf("%s calls the mutation %s, which none of its commands declares (mutation: %q)", f, m, m)
			}
		}
	}
	if !registerCommand.takesDryRun() || machinesCommand.takesDryRun() {
		t.Error("register takes -dry-run, machines does not")
	}
}

// The usage text lists every command once, each entry within 96 columns, and the
// changes its -dry-run paragraph names are the commands that make one.
func TestTheUsageTextListsEveryCommand(t *testing.T) {
	for _, name := range commands {
		if n := strings.Count(usage, "\n  "+name+" ") + strings.Count(usage, "\n  "+name+"\n"); n != 1 {
			t.Errorf("the usage text lists %s %d times", name, n)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(commands)))) != len(commands) {
		t.Errorf("two commands share a name: %v", commands)
	}
	for _, l := range strings.Split(usage, "\n") {
		if len([]rune(l)) > 96 {
			t.Errorf("usage line longer than 96 columns: %q", l)
		}
	}
	_, dry, _ := strings.Cut(usage, "-dry-run, after any command that changes something (")
	dry, _, _ = strings.Cut(dry, ")")
	dry = strings.Join(strings.Fields(dry), " ")
	for _, want := range []string{"register", "rolling-reboot start|pause|resume|cancel", "placement-guard on|off", "bulk"} {
		if !strings.Contains(", "+dry+",", ", "+want+",") {
			t.Errorf("-dry-run's list (%s) lacks %s", dry, want)
		}
	}
	if strings.Contains(", "+dry+",", ", machines,") {
		t.Errorf("-dry-run's list (%s) names machines, which changes nothing", dry)
	}
}
