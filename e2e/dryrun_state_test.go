package e2e

import (
	"fmt"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/producttest"
)

// A dry run's payload shows only state that exists, and a dry run advances no sequence:
// its change runs READ ONLY, its INSERT and UPDATE are calls of the plan, never sent. An allowed
// caller's dry run writes nothing at all, audit event included (a metric counts it),
// invalid input too; one refused for permission is audited REFUSED.
func TestDryRunShowsOnlyStateThatExists(t *testing.T) {
	parallel(t)
	e := producttest.Start(t)
	admin := e.Identity("admin", identity.ManageInfrastructure)
	e.MustGQL(admin, createIdentityQuery, map[string]any{"input": map[string]any{"name": "ops", "permissions": []string{"VIEW_INFRASTRUCTURE"}}})

	seqs := func() (identities, audits int64) {
		return e.Scalar(`SELECT last_value FROM identities_id_seq`).(int64), e.Scalar(`SELECT last_value FROM audit_events_id_seq`).(int64)
	}
	ids0, audits0 := seqs()
	events0 := e.Count("audit_events")

	created := e.MustGQL(admin, `mutation { createIdentity(input: {name: "planned", permissions: [VIEW_INFRASTRUCTURE], dryRun: true}) {
		token identity { name } plan { calls { system request } } } }`, nil)["createIdentity"].(map[string]any)
	if created["identity"] != nil || created["token"] != nil {
		t.Fatalf("a planned createIdentity answered an identity that was never created: %v", created)
	}
	if calls := fmt.Sprint(created["plan"]); calls != "map[calls:[map[request:INSERT identities system:DATABASE]]]" {
		t.Fatalf("createIdentity plan %s, want its one INSERT", calls)
	}

	revoked := e.MustGQL(admin, `mutation { revokeIdentity(input: {name: "ops", dryRun: true}) {
		identity { name revokedAt revokedBy active } plan { calls { system request } } } }`, nil)["revokeIdentity"].(map[string]any)
	if got := fmt.Sprint(revoked["identity"]); got != "map[active:true name:ops revokedAt:<nil> revokedBy:<nil>]" {
		t.Fatalf("a planned revokeIdentity answered %s, want ops as it is: not revoked", got)
	}
	if calls := fmt.Sprint(revoked["plan"]); calls != "map[calls:[map[request:UPDATE identities system:DATABASE]]]" {
		t.Fatalf("revokeIdentity plan %s, want its one UPDATE", calls)
	}
	if row := identityRow(t, e, admin, "ops"); row["revokedAt"] != nil || row["active"] != true {
		t.Fatalf("ops after a planned revocation: %v", row)
	}

	ids, audits := seqs()
	if ids != ids0 {
		t.Errorf("identities_id_seq went from %d to %d over two dry runs", ids0, ids)
	}
	// An invalid dry run by the same caller is no event either: it answers INVALID_INPUT.
	bad := e.GQL(admin, `mutation { createIdentity(input: {name: "Not A Name!", permissions: [VIEW_INFRASTRUCTURE], dryRun: true}) { identity { name } } }`, nil)
	if len(bad.Errors) == 0 || bad.Errors[0].Extensions["code"] != "INVALID_INPUT" {
		t.Fatalf("an invalid dry run: %+v", bad.Errors)
	}
	if audits != audits0 || e.Count("audit_events") != events0 || e.Scalar(`SELECT last_value FROM audit_events_id_seq`).(int64) != audits0 {
		t.Errorf("audit_events_id_seq went from %d to %d and the events from %d to %d over three allowed dry runs; want no change",
			audits0, audits, events0, e.Count("audit_events"))
	}
	// A dry run refused for permission is audited like any refused call.
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	refused := e.GQL(viewer, `mutation { revokeIdentity(input: {name: "ops", dryRun: true}) { plan { refused } } }`, nil)
	if len(refused.Errors) > 0 {
		t.Fatalf("a viewer's dry run: %+v", refused.Errors)
	}
	if o := e.Scalar(`SELECT outcome || ' ' || action || ' ' || actor FROM audit_events ORDER BY id DESC LIMIT 1`); o != "REFUSED revokeIdentity viewer" {
		t.Fatalf("a viewer's dry run was audited %v, want REFUSED", o)
	}
}
