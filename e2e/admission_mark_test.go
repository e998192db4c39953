package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/migrations"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// emptyAuditTrail deletes every audit event as a superuser can: with the append-only
// trigger out of the way for the session.
func emptyAuditTrail(t *testing.T, e *producttest.Env) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.DB.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{`SET LOCAL session_replication_role = replica`, `DELETE FROM audit_events`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.Count("audit_events"); n != 0 {
		t.Fatalf("%d audit events left", n)
	}
}

func (x *enrolled) phase(t *testing.T, name string) string {
	t.Helper()
	m := x.machine(t, name)
	var codes []string
	for _, w := range m["warnings"].([]any) {
		codes = append(codes, w.(map[string]any)["code"].(string))
	}
	return fmt.Sprintf("%v %v", m["phase"], codes)
}

// The phase of a member is derived from Incus (scheduler.instance, the admission mark) and
// Apelora's admission records, never from the audit trail: a build whose audit events are
// named otherwise, or an emptied trail, leaves every phase as it was.
func TestAdmissionIsAFactAndIncusCarriesItsMark(t *testing.T) {
	parallel(t)
	x := startEnrolled(t, 1)
	ctx := t.Context()
	node := x.lab.StartUnjoined(t, "node-2")
	x.lab.Join(t, node) // joined plainly: not held
	for _, n := range []string{"m1", "node-2"} {
		x.must(t, `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`, map[string]any{"n": n})
	}
	if p := x.phase(t, "node-2"); p != "UNHELD [JOINED_WITHOUT_HOLD]" {
		t.Fatalf("node-2 before admission: %s", p)
	}

	// A build whose gate names the admission's audit event otherwise (the action rewritten
	// on its way into the trail).
	if _, err := x.e.DB.Store.Pool().Exec(ctx, `
		CREATE FUNCTION rename_action() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN NEW.action := 'renamed-' || NEW.action; RETURN NEW; END $$;
		CREATE TRIGGER rename_action BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION rename_action()`); err != nil {
		t.Fatal(err)
	}
	before, _, err := x.inc.Member(ctx, "node-2")
	if err != nil {
		t.Fatal(err)
	}
	x.must(t, `mutation { admitMember(input: {name: "node-2"}) { machine { phase } } }`, nil)
	if p := x.phase(t, "node-2"); p != "ADMITTED []" {
		t.Fatalf("node-2 after admission: %s", p)
	}

	// Incus carries the mark, naming the admission record; the record keeps the audit event
	// that recorded it, and that event names the record.
	after, _, err := x.inc.Member(ctx, "node-2")
	if err != nil {
		t.Fatal(err)
	}
	mark := after.Config[lifecycle.AdmissionKey]
	var id, eventID int64
	var request, action string
	var admissionDetail *int64
	if err := x.e.DB.Store.Pool().QueryRow(ctx, `SELECT a.id, a.request_id, a.audit_event_id, e.action, (e.details->>'admission')::bigint
		FROM admissions a JOIN audit_events e ON e.id = a.audit_event_id WHERE a.machine = 'node-2' AND a.ended_at IS NULL`).
		Scan(&id, &request, &eventID, &action, &admissionDetail); err != nil {
		t.Fatal(err)
	}
	if mark != lifecycle.AdmissionMark(id, request) || request == "" || action != "renamed-admitMember" || admissionDetail == nil || *admissionDetail != id {
		t.Fatalf("mark %q; admission %d of request %q, event %d %q naming admission %v", mark, id, request, eventID, action, admissionDetail)
	}
	if fmt.Sprint(after.Roles, after.Groups, after.FailureDomain, after.Description) != fmt.Sprint(before.Roles, before.Groups, before.FailureDomain, before.Description) {
		t.Fatalf("admission changed more than the mark:\nbefore %+v\nafter  %+v", before, after)
	}

	// Drift takes the admitted roles from the admission record.
	admitted, err := x.e.DB.Store.Drift().Admitted(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(admitted) != 1 || admitted[0].Machine != "node-2" || !admitted[0].RolesKnown || fmt.Sprint(admitted[0].Roles) != fmt.Sprint(before.Roles) {
		t.Fatalf("drift's admissions %+v (member roles %v)", admitted, before.Roles)
	}

	// The trail emptied by a superuser: no phase moves.
	emptyAuditTrail(t, x.e)
	if p := x.phase(t, "node-2"); p != "ADMITTED []" {
		t.Fatalf("node-2 with the audit trail emptied: %s", p)
	}
	if p := x.phase(t, "m1"); p != "UNHELD [JOINED_WITHOUT_HOLD]" {
		t.Fatalf("m1 with the audit trail emptied: %s", p)
	}
	if r := x.gql(`mutation { admitMember(input: {name: "node-2"}) { machine { phase } } }`, nil); r.Code() != "FAILED_PRECONDITION" {
		t.Fatalf("admit twice with the trail emptied: %+v", r.Errors)
	}

	// A mark Apelora has no record of: set by hand on m1.
	m1, etag, err := x.inc.Member(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	put := m1.Put()
	put.Config[lifecycle.AdmissionKey] = "admission 999, request by-hand"
	if err := x.inc.UpdateMember(ctx, "m1", put, etag); err != nil {
		t.Fatal(err)
	}
	warned := fmt.Sprint(x.must(t, `{ machine(name: "m1") { warnings { message } } }`, nil))
	if p := x.phase(t, "m1"); p != "UNHELD [ADMISSION_NOT_RECORDED]" || !strings.Contains(warned, "run admitMember") {
		t.Fatalf("m1 marked by hand: %s %s", p, warned)
	}

	// Removed, then joined again: the admission ended with the member, and the new member
	// is not admitted.
	x.must(t, `mutation { removeMember(input: {name: "node-2"}) { machine { phase } } }`, nil)
	if p := x.phase(t, "node-2"); p != "REGISTERED []" {
		t.Fatalf("node-2 removed: %s", p)
	}
	if ended := x.e.Scalar(`SELECT ended_action FROM admissions WHERE id = $1`, id); ended != "renamed-removeMember" && ended != "removeMember" {
		t.Fatalf("admission %d ended by %v", id, ended)
	}
	rejoin(t, x.lab, node)
	if p := x.phase(t, "node-2"); p != "UNHELD [JOINED_WITHOUT_HOLD]" {
		t.Fatalf("node-2 joined again: %s", p)
	}
}

// rejoin starts a fresh daemon under old's name, old having been removed from the cluster,
// and joins it, as a reinstalled server would join again.
func rejoin(t *testing.T, lab *incuslab.Cluster, old *incuslab.Member) {
	t.Helper()
	name := old.Name
	_ = lab.StopMember(old)
	// The lab keeps one daemon per name and directory: the removed one steps aside.
	old.Name += "-removed"
	if err := os.Rename(old.Dir, old.Dir+"-removed"); err != nil {
		t.Fatal(err)
	}
	old.Dir += "-removed"
	lab.Join(t, lab.StartUnjoined(t, name))
}

// An upgrade from the release that read admissions from the trail: the migration carries
// the latest admission of each machine over as a fact, the member stays ADMITTED, and the
// server marks it in Incus at start, as a system action of its own.
func TestAdmissionsAreCarriedOverFromTheTrail(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 2)
	ctx := t.Context()
	// The database as the release before admissions were facts left it: every migration
	// before the one that made them (0008_admissions.sql, found by name).
	made, err := fs.Glob(migrations.Files, "*_admissions.sql")
	if err != nil || len(made) != 1 {
		t.Fatalf("the admissions migration: %v %v", made, err)
	}
	version, err := strconv.Atoi(strings.SplitN(made[0], "_", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewBefore(t, version)
	inc := lab.Client(t, lab.Members[0])
	m2, _, err := inc.Member(ctx, "m2")
	if err != nil {
		t.Fatal(err)
	}
	// What the previous release wrote: the records, and the trail of m2's admission and of
	// m1's, which was then removed.
	roles, _ := json.Marshal(map[string]any{"roles": m2.Roles, "verdict": "ADMISSIBLE"})
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO machine_records (name, provisioner, registered_at, registered_by) VALUES
			('m1', 'MANUAL', now(), 'admin'), ('m2', 'MANUAL', now(), 'admin')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO audit_events (actor, action, machine, outcome, request_id, details) VALUES
			('admin', 'registerMachine', 'm2', 'SUCCEEDED', 'req-1', '{}'),
			('admin', 'admitMember', 'm1', 'SUCCEEDED', 'req-2', '{}'),
			('admin', 'admitMember', 'm2', 'SUCCEEDED', 'req-3', $1),
			('admin', 'removeMember', 'm2', 'REFUSED', 'req-4', '{}'),
			('admin', 'removeMember', 'm1', 'SUCCEEDED', 'req-5', '{}'),
			('admin', 'removeMember', 'm2', 'PLANNED', 'req-6', '{}')`, string(roles)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var id int64
	var carried bool
	var carriedRoles []string
	if err := db.Store.Pool().QueryRow(ctx, `SELECT id, carried_over, roles FROM admissions WHERE machine = 'm2' AND ended_at IS NULL`).
		Scan(&id, &carried, &carriedRoles); err != nil {
		t.Fatal(err)
	}
	if !carried || fmt.Sprint(carriedRoles) != fmt.Sprint(m2.Roles) {
		t.Fatalf("carried over %v with roles %v, want %v", carried, carriedRoles, m2.Roles)
	}
	var n int64
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM admissions`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d admissions carried over (%v), want m2's only", n, err)
	}

	e := producttest.StartOn(t, db, db.Store, producttest.WithIncus(lab.Config))
	admin := e.Identity("admin", identity.ManageInfrastructure)
	x := &enrolled{lab: lab, e: e, admin: admin, inc: inc,
		gql: func(q string, vars map[string]any) *producttest.Response { return e.GQL(admin, q, vars) }}
	if p := x.phase(t, "m2"); p != "ADMITTED []" {
		t.Fatalf("m2 after the upgrade: %s", p)
	}
	if p := x.phase(t, "m1"); p != "UNHELD [JOINED_WITHOUT_HOLD]" {
		t.Fatalf("m1 (admitted, then removed) after the upgrade: %s", p)
	}

	// The server marks m2 in Incus, recorded as its own system action.
	deadline := time.Now().Add(30 * time.Second)
	var mark string
	for {
		m, _, err := inc.Member(ctx, "m2")
		if err != nil {
			t.Fatal(err)
		}
		if mark = m.Config[lifecycle.AdmissionKey]; mark != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	id = x.e.Scalar(`SELECT id FROM admissions WHERE machine = 'm2' AND ended_at IS NULL`).(int64)
	if mark != lifecycle.AdmissionMark(id, "req-3") {
		t.Fatalf("m2's mark %q, want admission %d's", mark, id)
	}
	// The marking reached Incus, so its intent (STARTED) is written; its outcome follows
	// once Incus's answer is back, which can be after the test read the mark (CI run 39).
	for e.Scalar(`SELECT count(*) FROM audit_events WHERE actor = $1 AND action = $2 AND machine = 'm2' AND outcome <> 'STARTED'`,
		admission.MigrationActor, admission.MarkAction).(int64) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no outcome of marking m2 in the audit trail")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := e.Scalar(`SELECT string_agg(outcome, ',' ORDER BY id) FROM audit_events WHERE actor = $1 AND action = $2 AND machine = 'm2'`,
		admission.MigrationActor, admission.MarkAction); got != "STARTED,SUCCEEDED" {
		t.Fatalf("audit events of marking m2: %v, want its intent and one success", got)
	}
	if p := x.phase(t, "m2"); p != "ADMITTED []" {
		t.Fatalf("m2 once marked: %s", p)
	}
	emptyAuditTrail(t, e)
	if p := x.phase(t, "m2"); p != "ADMITTED []" {
		t.Fatalf("m2 with the audit trail emptied: %s", p)
	}
}
