package postgres

import "github.com/apelora/fabric/audit"

// AuditChannel is the NOTIFY channel the audit_events trigger writes to.
const AuditChannel = "audit_events"

// AuditFeed streams audit events as they are recorded, on every replica.
type AuditFeed = rowFeed[audit.Event]

// NewAuditFeed returns a feed; call Run with the listener.
func (s *Store) NewAuditFeed() *AuditFeed {
	return &AuditFeed{s: s, channel: AuditChannel, what: "audit event",
		id:    func(e audit.Event) int64 { return e.ID },
		one:   s.AuditEvent,
		after: s.AuditEventsAfter,
	}
}
