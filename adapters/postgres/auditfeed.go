package postgres

import (
	"context"
	"strconv"

	"github.com/apelora/fabric/audit"
	"github.com/apelora/fabric/internal/broadcast"
)

// AuditChannel is the NOTIFY channel the audit_events trigger writes to.
const AuditChannel = "audit_events"

// AuditFeed turns audit-event notifications into events, reading each event once per
// process however many subscribers there are.
type AuditFeed struct {
	s *Store
	b broadcast.Broadcaster[audit.Event]
}

// NewAuditFeed returns a feed; call Run with the listener's subscription.
func (s *Store) NewAuditFeed() *AuditFeed { return &AuditFeed{s: s} }

// Subscribe streams events recorded from now on.
func (f *AuditFeed) Subscribe(buffer int) *broadcast.Subscription[audit.Event] {
	return f.b.Subscribe(buffer)
}

// Run forwards events until ctx ends or the listener's stream ends.
func (f *AuditFeed) Run(ctx context.Context, l *Listener) {
	sub := l.Subscribe(AuditChannel, 1024)
	defer sub.Close()
	var last int64
	for {
		var n Notification
		var ok bool
		select {
		case <-ctx.Done():
			return
		case n, ok = <-sub.C:
		}
		if !ok {
			// Dropped for falling behind: resubscribe and catch up from the database.
			sub = l.Subscribe(AuditChannel, 1024)
			n = Notification{Resync: true}
		}
		if n.Resync {
			if last == 0 {
				continue
			}
			events, err := f.s.AuditEventsAfter(ctx, last, 1000)
			if err != nil {
				f.s.log.Warn("catch up audit events after reconnect", "error", err)
				continue
			}
			for _, e := range events {
				f.b.Publish(e)
				last = max(last, e.ID)
			}
			continue
		}
		id, err := strconv.ParseInt(n.Payload, 10, 64)
		if err != nil {
			continue
		}
		e, err := f.s.AuditEvent(ctx, id)
		if err != nil || e == nil {
			if err != nil {
				f.s.log.Warn("read notified audit event", "id", id, "error", err)
			}
			continue
		}
		f.b.Publish(*e)
		last = max(last, e.ID)
	}
}
