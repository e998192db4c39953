package postgres_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/rolling"
	"github.com/apelora/fabric/internal/apperr"
)

// clusterCertificate makes a self-signed certificate (PEM) as a cluster's cluster.crt is.
func clusterCertificate(t *testing.T, name string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// The previous release's database keeps every record, admission, fence mapping, drill,
// tracked member and fence event (LEADING and QUORUM_LOST included), the worker's quorum
// state, member operations and rolling reboots: migration 0040 ties them all to the
// placeholder cluster, with the fence events' append-only trigger enabled again; the
// first start adopts the placeholder under APELORA_INCUS_CLUSTER_NAME, and a start naming
// another cluster is refused.
func TestClustersCarryOverThePreviousReleasesDatabase(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewBefore(t, 40)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Store.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// What the previous release wrote.
	exec(`INSERT INTO machine_records (name, provisioner, maas_system_id, hardware_uuid, registered_at, registered_by) VALUES
		('m1', 'MANUAL', NULL, NULL, now(), 'admin'), ('m2', 'MAAS', 'aaaa01', '4c4c4544-0042-3510-8052-000000000001', now(), 'admin'),
		('node-z', 'MANUAL', NULL, NULL, now(), 'admin')`)
	exec(`INSERT INTO admissions (machine, member, roles, admitted_by, request_id) VALUES ('m1', 'm1', '{database}', 'admin', 'r1'), ('m2', 'm2', NULL, 'admin', 'r2')`)
	exec(`INSERT INTO fence_mappings (member, maas_system_id, hardware_uuid, set_by, set_at) VALUES ('m2', 'aaaa01', '4c4c4544-0042-3510-8052-000000000001', 'admin', now())`)
	exec(`INSERT INTO fence_drills (member, at, maas_system_id, hardware_uuid, ok, worker) VALUES ('m2', now(), 'aaaa01', '4c4c4544-0042-3510-8052-000000000001', true, 'w1')`)
	exec(`INSERT INTO fence_member_tracking (member, first_seen_offline, last_observed) VALUES ('m2', now(), now())`)
	exec(`INSERT INTO fence_events (at, member, kind, worker) VALUES (now(), NULL, 'LEADING', 'w1'), (now(), 'm2', 'OFFLINE', 'w1'), (now(), NULL, 'QUORUM_LOST', 'w1')`)
	exec(`INSERT INTO fence_worker (worker, leader_since, last_round_at, settings, no_quorum_since) VALUES ('w1', now(), now(), '{}', now())`)
	exec(`INSERT INTO member_operations (machine, action, incus_operation, started_by, finished_at, outcome) VALUES ('m2', 'evacuate', 'op-1', 'admin', now(), 'SUCCEEDED')`)
	exec(`INSERT INTO rolling_operations (members, started_by, state, finished_at) VALUES ('{m2}', 'admin', 'SUCCEEDED', now())`)
	exec(`INSERT INTO rolling_operations (members, started_by) VALUES ('{m1}', 'admin')`)
	count := func(sql string) int64 {
		t.Helper()
		var n int64
		if err := db.Store.Pool().QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	tables := []string{"machine_records", "admissions", "fence_mappings", "fence_drills", "fence_member_tracking", "fence_events", "member_operations", "rolling_operations"}
	before := map[string]int64{}
	for _, tbl := range tables {
		before[tbl] = count(`SELECT count(*) FROM ` + tbl)
	}

	if _, err := db.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := db.Store.Clusters().Clusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Name != clusters.DefaultName || all[0].Adopted || !all[0].FromEnvironment {
		t.Fatalf("clusters after the migration: %+v, want the placeholder %q only", all, clusters.DefaultName)
	}
	placeholder := all[0].ID
	for _, tbl := range tables {
		if n := count(`SELECT count(*) FROM ` + tbl); n != before[tbl] {
			t.Errorf("%s: %d rows after the migration, %d before", tbl, n, before[tbl])
		}
		where := `cluster_id IS DISTINCT FROM ` + itoa(placeholder)
		if tbl == "fence_events" {
			where = `(cluster_id IS DISTINCT FROM ` + itoa(placeholder) + `) <> (kind = 'LEADING')`
		}
		if n := count(`SELECT count(*) FROM ` + tbl + ` WHERE ` + where); n != 0 {
			t.Errorf("%s: %d rows not in the carried-over cluster", tbl, n)
		}
	}
	if n := count(`SELECT count(*) FROM fence_clusters WHERE cluster_id = ` + itoa(placeholder) + ` AND no_quorum_since IS NOT NULL AND last_read_at IS NOT NULL`); n != 1 {
		t.Errorf("the worker's quorum state was not carried over to fence_clusters (%d rows)", n)
	}
	if n := count(`SELECT count(*) FROM pg_trigger WHERE tgname = 'fence_events_append_only' AND tgenabled = 'O'`); n != 1 {
		t.Fatalf("the fence events' append-only trigger is not enabled after the migration")
	}
	if _, err := db.Store.Pool().Exec(ctx, `UPDATE fence_events SET message = 'x'`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("fence events are writable after the migration: %v", err)
	}
	// One running or paused rolling reboot per cluster: a second in the same one is refused.
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO rolling_operations (members, started_by) VALUES ('{m2}', 'admin')`); err == nil {
		t.Fatal("a second running rolling reboot in the cluster was accepted")
	}

	// The first start adopts it, named by APELORA_INCUS_CLUSTER_NAME.
	svc := &clusters.Service{Store: db.Store.Clusters(), Registry: clusters.NewRegistry(db.Store.Clusters())}
	cert := clusterCertificate(t, "rack1")
	env := clusters.Environment{Name: "rack1", Seeds: []string{"https://127.0.0.1:8443"}, CertificatePEM: cert}
	c, err := svc.Adopt(ctx, env, "start-1")
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != placeholder || c.Name != "rack1" || !c.Adopted || c.Fingerprint != clusters.Fingerprints(cert)[0] {
		t.Fatalf("adopted %+v, want the placeholder %d as rack1", c, placeholder)
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE action = 'adoptCluster' AND outcome = 'SUCCEEDED' AND actor = 'apelora (migration)'`); n != 1 {
		t.Fatalf("%d adoption events, want 1", n)
	}
	// Again, the same: nothing changes, no event.
	if _, err := svc.Adopt(ctx, env, "start-2"); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE action = 'adoptCluster'`); n != 1 {
		t.Fatalf("%d adoption events after a second start, want 1", n)
	}
	// Another cluster's certificate: refused, naming both.
	other := clusterCertificate(t, "rack2")
	_, err = svc.Adopt(ctx, clusters.Environment{Name: "rack1", Seeds: []string{"https://127.0.0.2:8443"}, CertificatePEM: other}, "start-3")
	if !apperr.Is(err, apperr.FailedPrecondition) || !strings.Contains(err.Error(), clusters.Fingerprints(other)[0]) || !strings.Contains(err.Error(), c.Fingerprint) {
		t.Fatalf("a start naming another cluster: %v", err)
	}
	if n := count(`SELECT count(*) FROM clusters`); n != 1 {
		t.Fatalf("%d clusters after a refused start", n)
	}
	// A new member row names no cluster (this release's member code): the environment's.
	exec(`INSERT INTO fence_events (at, member, kind, worker) VALUES (now(), 'm1', 'OFFLINE', 'w2')`)
	if n := count(`SELECT count(*) FROM fence_events WHERE worker = 'w2' AND cluster_id = ` + itoa(placeholder)); n != 1 {
		t.Fatal("a fence event written without a cluster is not the environment's cluster's")
	}
}

// A database made by this release with no environment's cluster: the first start records
// one; a second cluster does not make rows without a cluster ambiguous while one of them is
// the environment's; removing a cluster an open admission or a machine record names is
// refused, saying what names it.
func TestAFreshDatabaseAdoptsTheEnvironmentsCluster(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	svc := &clusters.Service{Store: db.Store.Clusters(), Registry: clusters.NewRegistry(db.Store.Clusters())}
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO admissions (machine, member, admitted_by, request_id) VALUES ('m1', 'm1', 'admin', 'r1')`); err == nil {
		t.Fatal("an admission with no cluster to be in was accepted")
	}
	c, err := svc.Adopt(ctx, clusters.Environment{Socket: "/run/incus/unix.socket"}, "start-1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != clusters.DefaultName || !c.FromEnvironment || c.Socket != "/run/incus/unix.socket" || c.Fingerprint != "" {
		t.Fatalf("adopted %+v", c)
	}
	if got := svc.Registry.All(); len(got) != 1 || got[0].ID != c.ID {
		t.Fatalf("the registry holds %+v after the adoption", got)
	}
	// Its certificate, once the daemon answers, is filled in at the next start.
	cert := clusterCertificate(t, "local")
	c2, err := svc.Adopt(ctx, clusters.Environment{Socket: "/run/incus/unix.socket", CertificatePEM: cert}, "start-2")
	if err != nil || c2.ID != c.ID || c2.Fingerprint != clusters.Fingerprints(cert)[0] {
		t.Fatalf("second start: %+v %v", c2, err)
	}
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO clusters (name, seed_urls, certificate, fingerprint, registered_by) VALUES ('rack2', '{https://127.0.0.9:8443}', $1, $2, 'admin')`,
		clusterCertificate(t, "x"), strings.Repeat("ab", 32)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO admissions (machine, member, admitted_by, request_id) VALUES ('m1', 'm1', 'admin', 'r1')`); err != nil {
		t.Fatal(err)
	}
	refs, err := db.Store.Clusters().References(ctx, c.ID)
	if err != nil || refs.OpenAdmissions != 1 || refs.Refusal("default") == "" {
		t.Fatalf("references %+v %v", refs, err)
	}
	if _, err := svc.Remove(audited("removeCluster"), c.Name); !apperr.Is(err, apperr.FailedPrecondition) || !strings.Contains(err.Error(), "1 admission") {
		t.Fatalf("removing a cluster an open admission names: %v", err)
	}
	// A machine record naming it: the rule refuses; were the rule to miss it, the foreign
	// key would, and removeCluster says what names the cluster (never BUSY).
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO machine_records (name, provisioner, registered_at, registered_by, cluster_id) VALUES ('m3', 'MANUAL', now(), 'admin', $1)`, c.ID); err != nil {
		t.Fatal(err)
	}
	err = db.Store.Clusters().Change(audited("removeCluster"), func(tx clusters.Tx) error { return tx.Delete(context.Background(), c) })
	if e, ok := apperr.As(err); !ok || e.Code != apperr.FailedPrecondition || !strings.Contains(e.Message, "cluster default is still named by a machine record") ||
		!strings.Contains(e.Message, "unregisterMachine") {
		t.Fatalf("deleting a cluster a machine record names: %v", err)
	}
}

func itoa(n int64) string { return big.NewInt(n).String() }

// registerRack records a registered cluster named name (as registerCluster writes it) and
// returns its id.
func registerRack(t *testing.T, db *pgtest.DB, name string) int64 {
	t.Helper()
	cert := clusterCertificate(t, name)
	var id int64
	if err := db.Store.Pool().QueryRow(context.Background(), `INSERT INTO clusters (name, seed_urls, certificate, fingerprint, registered_by)
		VALUES ($1, '{https://127.0.0.9:8443}', $2, $3, 'admin') RETURNING id`, name, cert, clusters.Fingerprints(cert)[0]).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// history writes, for cluster id, what a member leaves behind once it is gone: an ended
// admission, a finished evacuation and a finished rolling reboot; it returns the task ids.
func history(t *testing.T, db *pgtest.DB, id int64, member string) (evacuation, reboot int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Store.Pool().Exec(ctx, `INSERT INTO admissions (machine, member, admitted_by, request_id, cluster_id, ended_at, ended_by)
		VALUES ($1, $1, 'admin', 'r1', $2, now(), 'admin')`, member, id); err != nil {
		t.Fatal(err)
	}
	if err := db.Store.Pool().QueryRow(ctx, `INSERT INTO member_operations (machine, action, incus_operation, started_by, finished_at, outcome, cluster_id)
		VALUES ($1, 'evacuate', 'op-1', 'admin', now(), 'SUCCEEDED', $2) RETURNING id`, member, id).Scan(&evacuation); err != nil {
		t.Fatal(err)
	}
	if err := db.Store.Pool().QueryRow(ctx, `INSERT INTO rolling_operations (members, started_by, state, step, finished_at, cluster_id)
		VALUES (ARRAY[$1], 'admin', 'SUCCEEDED', 'DONE', now(), $2) RETURNING id`, member, id).Scan(&reboot); err != nil {
		t.Fatal(err)
	}
	return evacuation, reboot
}

// checkHistory reads the history of a removed cluster back through the stores.
func checkHistory(t *testing.T, db *pgtest.DB, id int64, member string, evacuation, reboot int64) {
	t.Helper()
	ctx := context.Background()
	r, err := db.Store.Rolling().Task(ctx, reboot)
	if err != nil || r == nil || r.Cluster != id || r.State != "SUCCEEDED" {
		t.Fatalf("the removed cluster's rolling reboot %d reads %+v %v", reboot, r, err)
	}
	tasks, err := db.Store.Maintenance().Tasks(ctx, member, 10)
	if err != nil || len(tasks) != 1 || tasks[0].ID != evacuation || tasks[0].Cluster != id || tasks[0].Outcome != "SUCCEEDED" {
		t.Fatalf("the removed cluster's evacuation reads %+v %v", tasks, err)
	}
	var n int
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM admissions WHERE cluster_id = $1 AND machine = $2 AND ended_at IS NOT NULL`, id, member).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the removed cluster's ended admission: %d rows, %v", n, err)
	}
}

// checkNoNewRows: nothing new may name a removed cluster (migration 0042's check in place of
// the foreign keys), and the stores say so in the administrator's words.
func checkNoNewRows(t *testing.T, db *pgtest.DB, id int64, member string) {
	t.Helper()
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO admissions (machine, member, admitted_by, request_id, cluster_id) VALUES ($2, $2, 'admin', 'r9', $1)`,
		`INSERT INTO member_operations (machine, action, incus_operation, started_by, cluster_id) VALUES ($2, 'restore', 'op-9', 'admin', $1)`,
		`INSERT INTO rolling_operations (members, started_by, cluster_id) VALUES (ARRAY[$2], 'admin', $1)`,
		`UPDATE rolling_operations SET cluster_id = $1 WHERE cluster_id <> $1 AND $2 <> ''`,
	} {
		_, err := db.Store.Pool().Exec(ctx, sql, id, member)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23503" || !strings.HasSuffix(pgErr.ConstraintName, "_cluster_id_fkey") {
			t.Fatalf("%s for removed cluster %d: %v, want a foreign key violation", sql, id, err)
		}
	}
	var reboot, evac error
	err := db.Store.Audited(audited("rollingRebootTest"), "", func(ctx context.Context) error {
		_, reboot = db.Store.Rolling().Insert(ctx, rolling.Task{Cluster: id, Members: []string{member}, StartedBy: "admin", RequestID: "r9"})
		return reboot
	})
	if !apperr.Is(err, apperr.NotFound) || !apperr.Is(reboot, apperr.NotFound) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("a rolling reboot started in a removed cluster: %v", err)
	}
	err = db.Store.Audited(audited("maintenanceTest"), "", func(ctx context.Context) error {
		_, evac = db.Store.Maintenance().StartTask(ctx, maintenance.Task{Cluster: id, Machine: member, Action: maintenance.Evacuate, IncusOperation: "op-9", StartedBy: "admin"})
		return evac
	})
	if !apperr.Is(err, apperr.NotFound) || !apperr.Is(evac, apperr.NotFound) {
		t.Fatalf("an evacuation started in a removed cluster: %v", err)
	}
}

// A cluster whose members are all gone from Apelora's records is removed, whatever history
// it has: its ended admissions, finished evacuations and rolling reboots stay and read as
// before (migration 0042). While an admission is open or a task unfinished, removeCluster
// refuses, saying what names the cluster; and nothing new may name a removed cluster.
func TestRemovingAClusterKeepsItsHistory(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	env := db.EnvironmentCluster(t)
	rack2 := registerRack(t, db, "rack2")
	svc := &clusters.Service{Store: db.Store.Clusters(), Registry: clusters.NewRegistry(db.Store.Clusters())}
	if err := svc.Registry.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Store.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	evacuation, reboot := history(t, db, rack2, "m5")
	// A member still there, with an open admission, a running restore and a paused reboot.
	exec(`INSERT INTO machine_records (name, provisioner, registered_at, registered_by, cluster_id) VALUES ('m6', 'MANUAL', now(), 'admin', $1)`, rack2)
	exec(`INSERT INTO fence_mappings (member, maas_system_id, hardware_uuid, set_by, set_at, cluster_id) VALUES ('m6', 'bbbb01', $2, 'admin', now(), $1)`, rack2, uuid2)
	exec(`INSERT INTO admissions (machine, member, admitted_by, request_id, cluster_id) VALUES ('m6', 'm6', 'admin', 'r2', $1)`, rack2)
	exec(`INSERT INTO member_operations (machine, action, incus_operation, started_by, cluster_id) VALUES ('m6', 'restore', 'op-2', 'admin', $1)`, rack2)
	exec(`INSERT INTO rolling_operations (members, started_by, state, cluster_id) VALUES ('{m6}', 'admin', 'PAUSED', $1)`, rack2)
	// The same member name in the environment's cluster, with a history of its own.
	envEvacuation, _ := history(t, db, env, "m9")

	_, err := svc.Remove(audited("removeCluster"), "rack2")
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.FailedPrecondition {
		t.Fatalf("removing a cluster with a member left: %v", err)
	}
	for _, want := range []string{"1 machine record", "1 fence mapping", "1 admission", "1 unfinished rolling reboot", "1 running evacuation or restore"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("the refusal %q does not say %q", e.Message, want)
		}
	}
	// The member goes: its record, fence mapping and admission, and its tasks end.
	exec(`UPDATE admissions SET ended_at = now(), ended_by = 'admin' WHERE machine = 'm6'`)
	exec(`UPDATE member_operations SET finished_at = now(), outcome = 'SUCCEEDED' WHERE machine = 'm6'`)
	exec(`UPDATE rolling_operations SET finished_at = now(), state = 'CANCELLED' WHERE cluster_id = $1 AND finished_at IS NULL`, rack2)
	exec(`DELETE FROM fence_mappings WHERE member = 'm6'`)
	exec(`DELETE FROM machine_records WHERE name = 'm6'`)

	got, err := svc.Remove(audited("removeCluster"), "rack2")
	if err != nil || got == nil || got.ID != rack2 {
		t.Fatalf("removing a cluster whose members are gone, with history: %+v %v", got, err)
	}
	if _, ok := svc.Registry.ByID(rack2); ok {
		t.Fatal("the registry still holds the removed cluster")
	}
	var events int
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE action = 'removeCluster' AND outcome = 'SUCCEEDED'`).Scan(&events); err != nil || events != 1 {
		t.Fatalf("%d removeCluster events (%v), want 1", events, err)
	}
	checkHistory(t, db, rack2, "m5", evacuation, reboot)
	var kept int
	if err := db.Store.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM admissions WHERE cluster_id = $1) + (SELECT count(*) FROM member_operations WHERE cluster_id = $1)
		+ (SELECT count(*) FROM rolling_operations WHERE cluster_id = $1)`, rack2).Scan(&kept); err != nil || kept != 6 {
		t.Fatalf("%d history rows of the removed cluster kept (%v), want 6", kept, err)
	}
	// The environment's cluster and its history are untouched.
	if ts, err := db.Store.Maintenance().ClusterTasks(ctx, env, "m9", 10); err != nil || len(ts) != 1 || ts[0].ID != envEvacuation {
		t.Fatalf("the other cluster's history: %+v %v", ts, err)
	}
	checkNoNewRows(t, db, rack2, "m5")
	// A finished task of the removed cluster may still be written to (not its cluster).
	exec(`UPDATE rolling_operations SET reason = 'read later' WHERE id = $1`, reboot)
}

// A task started while its cluster is being removed is ordered against the removal as a
// foreign key orders it: started first, it holds the removal until it commits and the
// removal is then refused, naming it; removed first, the start waits and is refused.
func TestARemovalAndATaskStartedMeanwhile(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	db.EnvironmentCluster(t)
	rack2 := registerRack(t, db, "rack2")
	svc := &clusters.Service{Store: db.Store.Clusters(), Registry: clusters.NewRegistry(db.Store.Clusters())}
	if err := svc.Registry.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// waitBlocked polls until a session of this database waits on a row lock.
	waitBlocked := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			var n int
			if err := db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
				AND wait_event IN ('transactionid', 'tuple')`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("no session waits on the cluster's row after 60 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// The rolling reboot first: its transaction holds KEY SHARE on the cluster.
	tx, err := db.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) // a failure below must not hold the connection (and the database's drop)
	if _, err := tx.Exec(ctx, `INSERT INTO rolling_operations (members, started_by, cluster_id) VALUES ('{m1}', 'admin', $1)`, rack2); err != nil {
		t.Fatal(err)
	}
	removed := make(chan error, 1)
	go func() {
		_, err := svc.Remove(audited("removeCluster"), "rack2")
		removed <- err
	}()
	waitBlocked()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-removed; !apperr.Is(err, apperr.FailedPrecondition) || !strings.Contains(err.Error(), "1 unfinished rolling reboot") {
		t.Fatalf("a removal that waited for a rolling reboot's start: %v", err)
	}
	if _, err := db.Store.Pool().Exec(ctx, `UPDATE rolling_operations SET finished_at = now(), state = 'CANCELLED' WHERE cluster_id = $1`, rack2); err != nil {
		t.Fatal(err)
	}

	// The removal first: it holds the cluster's row until it commits; the start waits,
	// then finds no cluster.
	tx2, err := db.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	if _, err := tx2.Exec(ctx, `SELECT 1 FROM clusters WHERE id = $1 FOR UPDATE`, rack2); err != nil {
		t.Fatal(err)
	}
	if _, err := tx2.Exec(ctx, `DELETE FROM clusters WHERE id = $1`, rack2); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() {
		_, err := db.Store.Pool().Exec(ctx, `INSERT INTO member_operations (machine, action, incus_operation, started_by, cluster_id) VALUES ('m1', 'evacuate', 'op-3', 'admin', $1)`, rack2)
		started <- err
	}()
	waitBlocked()
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var pgErr *pgconn.PgError
	if err := <-started; !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		t.Fatalf("an evacuation started while its cluster was removed: %v", err)
	}
}

// Migration 0042 on a database of the previous release holding a registered cluster's
// history: the rows stay, the cluster can be removed, and they still read.
func TestClusterHistoryMigration(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewBefore(t, 42)
	env := db.EnvironmentCluster(t)
	rack2 := registerRack(t, db, "rack2")
	evacuation, reboot := history(t, db, rack2, "m5")
	history(t, db, env, "m9")
	if _, err := db.Store.Pool().Exec(ctx, `DELETE FROM clusters WHERE id = $1`, rack2); err == nil {
		t.Fatal("before migration 0042 a cluster with history could be deleted: the test does not test the migration")
	}
	if _, err := db.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var fks int
	if err := db.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND confrelid = 'clusters'::regclass
		AND conrelid IN ('admissions'::regclass, 'member_operations'::regclass, 'rolling_operations'::regclass)`).Scan(&fks); err != nil || fks != 0 {
		t.Fatalf("%d foreign keys to clusters left on the history tables (%v)", fks, err)
	}
	svc := &clusters.Service{Store: db.Store.Clusters(), Registry: clusters.NewRegistry(db.Store.Clusters())}
	if err := svc.Registry.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Remove(audited("removeCluster"), "rack2"); err != nil {
		t.Fatalf("removing a cluster with history after the migration: %v", err)
	}
	checkHistory(t, db, rack2, "m5", evacuation, reboot)
	checkNoNewRows(t, db, rack2, "m5")
	// A row naming no cluster still lands in the environment's, and is checked there.
	var got int64
	if err := db.Store.Pool().QueryRow(ctx, `INSERT INTO rolling_operations (members, started_by) VALUES ('{m7}', 'admin') RETURNING cluster_id`).Scan(&got); err != nil || got != env {
		t.Fatalf("a rolling reboot naming no cluster: in %d (%v), want %d", got, err, env)
	}
}
