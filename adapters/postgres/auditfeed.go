package postgres

import (
	"context"

	"github.com/apelora/fabric/domain/audit"
)

// AuditChannel is the NOTIFY channel the audit_events trigger writes to.
const AuditChannel = "audit_events"

// AuditFeed publishes audit events as they are recorded, on every replica, keyed by
// machine.
type AuditFeed = rowFeed[audit.Event]

// NewAuditFeed returns a feed; call Run with the listener.
func (s *Store) NewAuditFeed() *AuditFeed {
	f := newRowFeed(s, AuditChannel, "audit event",
		func(e audit.Event) int64 { return e.ID },
		func(e audit.Event) string { return e.Machine })
	f.last = func(ctx context.Context) (int64, error) { return s.lastID(ctx, "audit_events") }
	f.after = func(ctx context.Context, after int64, limit int) ([]audit.Event, error) {
		return s.AuditEventsAfter(ctx, audit.Filter{}, after, limit)
	}
	return f
}

// lastID is the highest id of an append-only table (0 when empty).
func (s *Store) lastID(ctx context.Context, table string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+table).Scan(&id)
	return id, dbError(err)
}
