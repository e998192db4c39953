package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/app"
)

// TestConfigurationDocIsCurrent: the committed docs/configuration.md is what the generator
// writes from the code's tables now (scripts/test.sh checks the same after go generate).
func TestConfigurationDocIsCurrent(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../" + docFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run `go generate ./...` (or `go run ./internal/app/configdoc` from the module root) and commit it", docFile)
	}
}

// TestEveryVariableIsDocumentedOnce: each variable the server and the worker list is a row
// of exactly one table, with its default and meaning as the code has them.
func TestEveryVariableIsDocumentedOnce(t *testing.T) {
	doc, err := render()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append(app.Variables(), app.WorkerVariables()...) {
		prefix := "| `" + v.Name + "` | "
		if n := strings.Count(string(doc), "\n"+prefix); n != 1 {
			t.Errorf("%s is in %d rows", v.Name, n)
			continue
		}
		row := string(doc)[strings.Index(string(doc), "\n"+prefix)+1:]
		row = row[:strings.Index(row, "\n")]
		if v.Name != "APELORA_STATE_DIR" && !strings.HasPrefix(row, prefix+cell(v.Default)+" | "+cell(v.Meaning)) {
			t.Errorf("%s's row is %q; want its default %q and meaning %q", v.Name, row, v.Default, v.Meaning)
		}
	}
}
