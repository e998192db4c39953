package postgres_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/clusters"
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
// the environment's; removing what a cluster names is refused by the foreign keys.
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
	if _, err := db.Store.Pool().Exec(ctx, `DELETE FROM clusters WHERE id = $1`, c.ID); err == nil {
		t.Fatal("a cluster an admission names was deleted")
	}
}

func itoa(n int64) string { return big.NewInt(n).String() }
