package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

func TestPlacementGuardCommand(t *testing.T) {
	lab := incuslab.Start(t, 1)
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", e.Identity("ops", identity.ManageInfrastructure))
	do := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		return out.String(), err
	}
	scriptlet := func() string {
		out, err := lab.CLI(lab.Members[0], "config", "get", placement.ScriptletKey)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	if out, err := do("placement-guard"); err != nil || !strings.Contains(out, "placement guard OFF") {
		t.Fatalf("placement-guard: %v\n%s", err, out)
	}
	if out, err := do("placement-guard", "on", "-dry-run"); err != nil || !strings.Contains(out, "PATCH /1.0") || scriptlet() != "" {
		t.Fatalf("placement-guard on -dry-run: %v\n%s", err, out)
	}
	if out, err := do("placement-guard", "on"); err != nil || !strings.Contains(out, "placement guard ON") || scriptlet() != strings.TrimSpace(placement.Scriptlet) {
		t.Fatalf("placement-guard on: %v\n%s", err, out)
	}
	if out, err := do("placement-guard", "off"); err != nil || !strings.Contains(out, "placement guard OFF") || scriptlet() != "" {
		t.Fatalf("placement-guard off: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"placement-guard", "maybe"}, {"placement-guard", "-dry-run"}, {"placement-guard", "on", "off"}} {
		if _, err := do(args...); err == nil || !strings.HasPrefix(err.Error(), "usage: ") {
			t.Fatalf("%v: %v", args, err)
		}
	}
}
