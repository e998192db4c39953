package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/mutations"
)

// ClusterChannel is where every change to the cluster records is announced (migration
// 0040's trigger; the payload is the cluster's id): each replica's registry reads them again.
const ClusterChannel = "clusters"

// Clusters is the cluster-record view of the store (clusters.Store).
func (s *Store) Clusters() clusters.Store { return clusterStore{s} }

type clusterStore struct{ s *Store }

type clusterTx struct{ tx pgx.Tx }

var _ clusters.Store = clusterStore{}

// Change runs fn holding the clusters' lease (registerCluster, removeCluster, and the
// adoption at start, whose action is the server's own).
func (c clusterStore) Change(ctx context.Context, fn func(clusters.Tx) error) error {
	return c.s.changeHolding(ctx, mutations.LockClusters, "", func(_ context.Context, tx pgx.Tx) error { return fn(clusterTx{tx}) })
}

const clusterColumns = `id, name, seed_urls, coalesce(socket, ''), coalesce(certificate, ''), coalesce(fingerprint, ''),
	from_environment, adopted, registered_by, registered_at`

func scanCluster(row pgx.Row) (clusters.Cluster, error) {
	var c clusters.Cluster
	err := row.Scan(&c.ID, &c.Name, &c.SeedURLs, &c.Socket, &c.CertificatePEM, &c.Fingerprint, &c.FromEnvironment, &c.Adopted,
		&c.RegisteredBy, &c.RegisteredAt)
	return c, err
}

func readClusters(ctx context.Context, q querier) ([]clusters.Cluster, error) {
	rows, err := q.Query(ctx, `SELECT `+clusterColumns+` FROM clusters ORDER BY name`)
	if err != nil {
		return nil, dbError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (clusters.Cluster, error) { return scanCluster(r) })
	if err != nil {
		return nil, dbError(err)
	}
	return out, nil
}

func (c clusterStore) Clusters(ctx context.Context) ([]clusters.Cluster, error) {
	return readClusters(ctx, c.s.q(ctx))
}

// references counts what names a cluster (clusters.References) in one statement, and the
// machine records that name none (which cluster they count for is clusters.Unassigned's
// to say: References.Counted).
const references = `SELECT
	(SELECT count(*) FROM machine_records WHERE cluster_id = $1),
	(SELECT count(*) FROM machine_records WHERE cluster_id IS NULL),
	(SELECT count(*) FROM fence_mappings WHERE cluster_id = $1),
	(SELECT count(*) FROM admissions WHERE cluster_id = $1 AND ended_at IS NULL),
	(SELECT count(*) FROM rolling_operations WHERE cluster_id = $1 AND finished_at IS NULL),
	(SELECT count(*) FROM member_operations WHERE cluster_id = $1 AND finished_at IS NULL),
	(SELECT count(*) FROM identity_grants WHERE cluster_id = $1),
	(SELECT count(*) FROM fence_member_tracking WHERE cluster_id = $1),
	(SELECT count(*) FROM fence_clusters WHERE cluster_id = $1)`

func readReferences(ctx context.Context, q querier, id int64) (clusters.References, error) {
	var r clusters.References
	err := q.QueryRow(ctx, references, id).Scan(&r.MachineRecords, &r.UnassignedRecords, &r.FenceMappings, &r.OpenAdmissions, &r.UnfinishedRollingReboot,
		&r.RunningMaintenanceTasks, &r.Grants, &r.TrackedMembers, &r.FenceState)
	return r, dbError(err)
}

func (c clusterStore) References(ctx context.Context, id int64) (clusters.References, error) {
	return readReferences(ctx, c.s.q(ctx), id)
}

func (t clusterTx) Clusters(ctx context.Context) ([]clusters.Cluster, error) {
	return readClusters(ctx, t.tx)
}

func (t clusterTx) References(ctx context.Context, id int64) (clusters.References, error) {
	// FOR UPDATE on the record: a change that would name the cluster now waits for this
	// one and then finds it gone (its foreign key, or migration 0042's check on
	// admissions, evacuations and restores, and rolling reboots, takes KEY SHARE); one that
	// named it first holds this lock until it commits, and the count below sees its row.
	if _, err := t.tx.Exec(ctx, `SELECT 1 FROM clusters WHERE id = $1 FOR UPDATE`, id); err != nil {
		return clusters.References{}, dbError(err)
	}
	return readReferences(ctx, t.tx, id)
}

func (t clusterTx) Insert(ctx context.Context, c clusters.Cluster) (clusters.Cluster, error) {
	var id int64
	err := t.tx.QueryRow(ctx, `INSERT INTO clusters (name, seed_urls, socket, certificate, fingerprint, from_environment, adopted, registered_by)
		VALUES ($1, $2, nullif($3, ''), nullif($4, ''), nullif($5, ''), $6, $7, $8) RETURNING id`,
		c.Name, c.SeedURLs, c.Socket, c.CertificatePEM, c.Fingerprint, c.FromEnvironment, c.Adopted, c.RegisteredBy).Scan(&id)
	if planned(t.tx) && errors.Is(err, pgx.ErrNoRows) {
		// In a dry run the INSERT is a call of the plan: nothing is recorded.
		return clusters.Cluster{}, nil
	}
	if err != nil {
		return clusters.Cluster{}, clusterWriteError(err, c)
	}
	got, err := scanCluster(t.tx.QueryRow(ctx, `SELECT `+clusterColumns+` FROM clusters WHERE id = $1`, id))
	return got, dbError(err)
}

func (t clusterTx) Update(ctx context.Context, c clusters.Cluster) error {
	_, err := t.tx.Exec(ctx, `UPDATE clusters SET name = $2, seed_urls = $3, socket = nullif($4, ''), certificate = nullif($5, ''),
		fingerprint = nullif($6, ''), adopted = $7 WHERE id = $1`, c.ID, c.Name, c.SeedURLs, c.Socket, c.CertificatePEM, c.Fingerprint, c.Adopted)
	if err != nil {
		return clusterWriteError(err, c)
	}
	return nil
}

func (t clusterTx) Delete(ctx context.Context, c clusters.Cluster) error {
	_, err := t.tx.Exec(ctx, `DELETE FROM clusters WHERE id = $1`, c.ID)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		// A foreign key refuses: References' count, read under the FOR UPDATE lock, saw
		// nothing of it, so no change that commits later made it (its key check waited for
		// the lock and then found no cluster). It is a row the rule does not count, and it
		// stays until it is removed: say which.
		what, next := referrer(pgErr.TableName)
		return &apperr.Error{Code: apperr.FailedPrecondition, Field: "name", Cause: err, Message: fmt.Sprintf(
			"cluster %s is still named by %s (table %s, constraint %s): %s, then remove the cluster again", c.Name, what, pgErr.TableName, pgErr.ConstraintName, next),
			Details: map[string]any{"table": pgErr.TableName, "constraint": pgErr.ConstraintName}}
	}
	return dbError(err)
}

// referrer names, in the administrator's words, what a row of table is and what removes it.
func referrer(table string) (what, next string) {
	switch table {
	case "machine_records":
		return "a machine record", "remove its members' records (removeMember, unregisterMachine)"
	case "fence_mappings":
		return "a fence mapping", "remove its fence mappings (removeFenceMapping)"
	default:
		return "a row of " + table, "that row is not one removeCluster knows of: report it, with this message"
	}
}

// clusterWriteError turns a unique violation into the refusal it stands for.
func clusterWriteError(err error, c clusters.Cluster) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		switch pgErr.ConstraintName {
		case "clusters_name_key":
			return &apperr.Error{Code: apperr.AlreadyExists, Field: "name", Message: fmt.Sprintf("a cluster named %s is registered already: choose another name", c.Name)}
		case "clusters_fingerprint_key":
			return &apperr.Error{Code: apperr.AlreadyExists, Field: "clusterCertificate", Message: fmt.Sprintf("a cluster with certificate %s is registered already: it is the same cluster", c.Fingerprint)}
		case "clusters_one_from_environment":
			return apperr.Wrap(err, apperr.Busy, "another process adopted the cluster of APELORA_INCUS_* at the same time: start again")
		}
	}
	return dbError(err)
}

// WatchClusters has r read the cluster records again at every change of them on any
// replica (NOTIFY clusters), and after the listener reconnects (a change may have been
// missed), until ctx ends; a failed read is logged and tried at the next notification.
func (l *Listener) WatchClusters(ctx context.Context, r interface {
	Refresh(ctx context.Context) error
}) {
	sub := l.Subscribe(ClusterChannel, 64)
	defer func() { sub.Close() }()
	refresh := func() {
		if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
			l.s.log.Warn("could not read the Incus clusters again after a change; the next change reads them", "error", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-sub.C:
			if !ok {
				sub = l.Subscribe(ClusterChannel, 64)
			}
			refresh()
		}
	}
}

var _ clusters.ScopeReader = (*Store)(nil)

// ScopeFacts reads, in one query on unique indexes, the clusters of the machine record
// named machine, of the one of MAAS system id systemID, and of the rolling reboot
// rollingReboot ("" names none).
func (s *Store) ScopeFacts(ctx context.Context, machine, systemID, rollingReboot string) (clusters.ScopeFacts, error) {
	var f clusters.ScopeFacts
	err := s.pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM machine_records WHERE name = $1), (SELECT cluster_id FROM machine_records WHERE name = $1),
			EXISTS (SELECT 1 FROM machine_records WHERE maas_system_id = $2), (SELECT cluster_id FROM machine_records WHERE maas_system_id = $2),
			(SELECT cluster_id FROM rolling_operations WHERE id::text = $3)`, machine, systemID, rollingReboot).
		Scan(&f.Machine.Found, &f.Machine.Cluster, &f.SystemID.Found, &f.SystemID.Cluster, &f.RollingReboot)
	return f, dbError(err)
}
