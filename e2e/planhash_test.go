package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// A change confirmed with the plan it was shown (its planHash) runs only while its plan is
// still that one: another change in between makes the confirmation PLAN_CHANGED with the
// new plan, nothing changed, audited REFUSED; a confirmation of the current plan runs and
// its audit event keeps the approved plan and its hash; automation that sends no hash is
// audited "no plan shown".
func TestAConfirmationIsBoundToThePlanShown(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	other := e.Identity("other-admin", identity.ManageInfrastructure)
	const create = `mutation($in: CreateIdentityInput!) { createIdentity(input: $in) { identity { name } plan { refused planHash refusals { code } } } }`
	in := func(extra map[string]any) map[string]any {
		m := map[string]any{"name": "ops", "permissions": []string{"VIEW_INFRASTRUCTURE"}}
		for k, v := range extra {
			m[k] = v
		}
		return map[string]any{"in": m}
	}
	planOf := func(r *producttest.Response) map[string]any {
		t.Helper()
		if len(r.Errors) > 0 {
			t.Fatalf("dry run: %+v", r.Errors)
		}
		return r.Data["createIdentity"].(map[string]any)["plan"].(map[string]any)
	}

	// The plan shown, twice: the same plan hashes the same.
	shown := planOf(e.GQL(admin, create, in(map[string]any{"dryRun": true})))
	hash, _ := shown["planHash"].(string)
	if !strings.HasPrefix(hash, "sha256:") || shown["refused"] != false {
		t.Fatalf("plan shown %v", shown)
	}
	if again := planOf(e.GQL(admin, create, in(map[string]any{"dryRun": true}))); again["planHash"] != hash {
		t.Fatalf("the same plan hashed %v, then %v", hash, again["planHash"])
	}

	// Before the administrator confirms, another one makes the same identity.
	e.MustGQL(other, create, in(nil))
	events := e.Count("audit_events")
	r := e.GQL(admin, create, in(map[string]any{"planHash": hash}))
	if len(r.Errors) != 1 || r.Errors[0].Extensions["code"] != "PLAN_CHANGED" {
		t.Fatalf("a stale confirmation: %+v", r.Errors)
	}
	details, _ := r.Errors[0].Extensions["details"].(map[string]any)
	if details["planHash"] == hash || !strings.Contains(strings.ToUpper(fmt.Sprint(details["plan"])), "ALREADY_EXISTS") {
		t.Fatalf("the refusal's new plan %v", details)
	}
	if n := e.Count("audit_events"); n != events+1 {
		t.Fatalf("%d audit events for a stale confirmation, want 1", n-events)
	}
	if o := e.Scalar(`SELECT outcome || ' ' || action FROM audit_events ORDER BY id DESC LIMIT 1`); o != "REFUSED createIdentity" {
		t.Fatalf("a stale confirmation was audited %v", o)
	}
	if n := e.Scalar(`SELECT count(*) FROM identities WHERE name = 'ops'`).(int64); n != 1 {
		t.Fatalf("%d identities named ops", n)
	}

	// A confirmation of the plan as it stands runs, and its event keeps that plan.
	shown = planOf(e.GQL(admin, create, in(map[string]any{"name": "ops2", "dryRun": true})))
	ok := e.MustGQL(admin, create, in(map[string]any{"name": "ops2", "planHash": shown["planHash"]}))
	if ok["createIdentity"].(map[string]any)["identity"] == nil {
		t.Fatalf("confirmed with the current plan: %v", ok)
	}
	if d := e.Scalar(`SELECT details->>'planHash' || ' ' || (details->'approvedPlan' ? 'steps')::text FROM audit_events ORDER BY id DESC LIMIT 1`); d != shown["planHash"].(string)+" true" {
		t.Fatalf("the change's event keeps %v", d)
	}
	// Automation sends no hash: the event says no plan was shown.
	e.MustGQL(admin, create, in(map[string]any{"name": "ops3"}))
	if d := e.Scalar(`SELECT details->>'approvedPlan' FROM audit_events ORDER BY id DESC LIMIT 1`); d != "no plan shown" {
		t.Fatalf("a change without a plan hash: %v", d)
	}
	// A hash that is no plan's is refused the same way, nothing changed.
	if r := e.GQL(admin, create, in(map[string]any{"name": "ops4", "planHash": "sha256:00"})); len(r.Errors) != 1 || r.Errors[0].Extensions["code"] != "PLAN_CHANGED" {
		t.Fatalf("a made-up hash: %+v", r.Errors)
	}
	if n := e.Scalar(`SELECT count(*) FROM identities WHERE name = 'ops4'`).(int64); n != 0 {
		t.Fatal("a refused confirmation created the identity")
	}
}
