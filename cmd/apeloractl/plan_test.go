package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/mutations"
)

// Every command's mutation is declared (so it takes -dry-run), and every declared
// mutation apeloractl calls is some command's: a new command calling a mutation cannot
// forget to take -dry-run.
func TestEveryChangingCommandNamesADeclaredMutation(t *testing.T) {
	commands := map[string]string{}
	for cmd, m := range mutationOf {
		if _, ok := mutations.Of(m); !ok {
			t.Errorf("command %s calls %q, which is no declared mutation (schema/, @change)", cmd, m)
		}
		commands[m] = cmd
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`client\.([A-Z]\w*)\(ctx`)
	called := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			name := strings.ToLower(m[1][:1]) + m[1][1:]
			if _, ok := mutations.Of(name); !ok {
				continue // a query or subscription
			}
			called++
			if commands[name] == "" {
				t.Errorf("%s calls the mutation %s, but no command in mutationOf does: add its command there", f, name)
			}
		}
	}
	if called < len(mutationOf) {
		t.Errorf("found %d calls of declared mutations in apeloractl's sources, fewer than its %d changing commands", called, len(mutationOf))
	}
	if !changing("register") || changing("machines") {
		t.Error("changing: register changes, machines reads")
	}
}
