package audit

import (
	"context"
	"strconv"
	"strings"

	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/broadcast"
)

// Trail reads the stored audit trail in id order.
type Trail interface {
	// AuditEventsAfter returns the events f keeps with an id above after, oldest first.
	AuditEventsAfter(ctx context.Context, f Filter, after int64, limit int) ([]Event, error)
}

// Recorded says what an auditEventRecorded subscriber receives from the audit feed: the
// events f keeps, first those recorded after the event id `after` when given, read from
// the trail, then live ones, without gaps or repeats; a subscriber that falls behind
// catches up from the trail. Subscribe with broadcast.Subscribe on the feed's hub.
func Recorded(trail Trail, f Filter, after *int64) broadcast.Want[string, Event] {
	return broadcast.Want[string, Event]{
		Key: f.Machine, All: f.Machine == "", Match: f.Matches, After: after,
		Replay: func(ctx context.Context, after int64, limit int) ([]Event, error) {
			return trail.AuditEventsAfter(ctx, f, after, limit)
		},
	}
}

// ParseEventID reads the id of an audit event a client passes back (AuditEvent.id).
func ParseEventID(field, s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || id < 0 {
		return 0, apperr.Invalid(field, "%s is not an audit event id: pass the id of the last event you received", apperr.Quote(s))
	}
	return id, nil
}
