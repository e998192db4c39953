package main

import (
	"os"
	"strings"
	"testing"
)

// The committed table is what bulk-outcomes.json says now.
func TestOutcomesTableIsCurrent(t *testing.T) {
	src, err := os.ReadFile("../../../" + source)
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../" + goFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is stale: run go generate ./... and commit it", goFile)
	}
}

// A file that says something else than refused or failed is refused.
func TestOutcomesRefuseWhatCannotBeRead(t *testing.T) {
	src, _ := os.ReadFile("../../../" + source)
	bad := strings.Replace(string(src), `"BUSY": "refused"`, `"BUSY": "maybe"`, 1)
	if _, err := generate([]byte(bad)); err == nil || !strings.Contains(err.Error(), `BUSY is "maybe"`) {
		t.Errorf("an outcome that is neither: %v", err)
	}
}
