package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// -dry-run prints the plan's hash and -plan-hash confirms that plan and no other: a
// change made in between (another administrator) makes the confirmation PLAN_CHANGED,
// nothing changed.
func TestAPlanHashConfirmsThePlanShown(t *testing.T) {
	e := producttest.Start(t)
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", e.Identity("ops", identity.ManageInfrastructure))
	other := e.Identity("other", identity.ManageInfrastructure)
	do := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		return out.String(), err
	}
	hashIn := regexp.MustCompile(`-plan-hash (sha256:[0-9a-f]{64})`)

	out, err := do("create-identity", "auditor", "-permission", "view-infrastructure", "-dry-run")
	m := hashIn.FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("create-identity -dry-run: %v\n%s", err, out)
	}
	// Another administrator makes it first: the plan shown is stale.
	e.MustGQL(other, `mutation { createIdentity(input: {name: "auditor", permissions: [VIEW_INFRASTRUCTURE]}) { identity { name } } }`, nil)
	if out, err = do("create-identity", "auditor", "-permission", "view-infrastructure", "-plan-hash", m[1]); err == nil || !strings.Contains(err.Error(), "PLAN_CHANGED") {
		t.Fatalf("a stale plan hash: %v\n%s", err, out)
	}

	out, _ = do("create-identity", "auditor2", "-permission", "view-infrastructure", "-dry-run")
	m = hashIn.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no hash printed:\n%s", out)
	}
	if out, err = do("create-identity", "auditor2", "-permission", "view-infrastructure", "-plan-hash", m[1]); err != nil || !strings.Contains(out, "auditor2") {
		t.Fatalf("confirmed with the current plan: %v\n%s", err, out)
	}
	if _, err = do("create-identity", "x", "-permission", "view-infrastructure", "-plan-hash", m[1], "-dry-run"); err == nil {
		t.Fatal("-plan-hash with -dry-run was accepted")
	}
	if _, err = do("whoami", "-plan-hash", m[1]); err == nil {
		t.Fatal("-plan-hash on a read was accepted")
	}
}
