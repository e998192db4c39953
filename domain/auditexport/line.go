// Package auditexport streams the audit trail to a SIEM: every event, in leaf order, as a
// line that carries its leaf index, its leaf hash and the latest signed checkpoint, so the
// far side can check the chain without the database (VerifyExport). Sinks (syslog over
// TCP, a JSON Lines file) are adapters behind Sink; one exporter per sink leads at a time
// and the next leaf to send is kept in PostgreSQL, so an outage or a restart loses nothing.
package auditexport

import (
	"encoding/json"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/domain/auditlog"
)

// Line is one exported event: the JSON object of a JSON Lines file and of a syslog
// message's MSG part. Event holds every field of the leaf exactly as the leaf hash covers
// it (Parameters and Details as PostgreSQL's jsonb text, At to the microsecond), so the far
// side recomputes the leaf hash from the line itself.
type Line struct {
	LeafIndex int64  `json:"leafIndex"`
	LeafHash  string `json:"leafHash"` // standard base64, as tlog writes hashes
	Event     Event  `json:"event"`
	// Checkpoint is the latest signed checkpoint when the line was sent (the note's text:
	// tree size, root hash, signature line); "" while none was signed yet.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// CheckpointLine is the line sent when a new checkpoint covers events already sent and no
// event is waiting to carry it: {"checkpoint": "…"}, with no event. It lets the far side
// prove the last events without waiting for the next one.
type CheckpointLine struct {
	Checkpoint string `json:"checkpoint"`
}

// IsEvent says whether a line (its JSON object) is an event's rather than a checkpoint's.
func IsEvent(object []byte) bool {
	var probe struct {
		Event json.RawMessage `json:"event"`
	}
	return json.Unmarshal(object, &probe) == nil && len(probe.Event) > 0 && string(probe.Event) != "null"
}

// Event is the audit event's fields, named as the API names them.
type Event struct {
	ID         int64  `json:"id"`
	At         string `json:"at"` // RFC 3339, UTC, microseconds
	Actor      string `json:"actor"`
	Action     string `json:"action"`
	Machine    string `json:"machine,omitempty"`
	Outcome    string `json:"outcome"`
	Error      string `json:"error,omitempty"`
	RequestID  string `json:"requestId"`
	Parameters string `json:"parameters"` // the JSON text the leaf covers, byte for byte
	Details    string `json:"details"`
}

// timeFormat keeps the database's microseconds, which the leaf covers.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// Encode writes event e as a line (no newline), with checkpoint cp (nil: none yet).
func Encode(e auditlog.StoredEvent, cp *auditlog.Checkpoint) ([]byte, error) {
	l := Line{
		LeafIndex: e.LeafIndex,
		LeafHash:  e.LeafHash.String(),
		Event: Event{ID: e.ID, At: e.At.UTC().Format(timeFormat), Actor: e.Actor, Action: e.Action, Machine: e.Machine,
			Outcome: e.Outcome, Error: e.Error, RequestID: e.RequestID, Parameters: e.Parameters, Details: e.Details},
	}
	if cp != nil {
		l.Checkpoint = cp.Signed
	}
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("encode audit event %d for export: %w", e.ID, err)
	}
	return b, nil
}

// Record is the leaf record the line states.
func (l Line) Record() (auditlog.Record, error) {
	at, err := time.Parse(time.RFC3339Nano, l.Event.At)
	if err != nil {
		return auditlog.Record{}, fmt.Errorf("its time %q is not RFC 3339", l.Event.At)
	}
	return auditlog.Record{ID: l.Event.ID, At: at, Actor: l.Event.Actor, Action: l.Event.Action, Machine: l.Event.Machine,
		Outcome: l.Event.Outcome, Error: l.Event.Error, RequestID: l.Event.RequestID,
		Parameters: l.Event.Parameters, Details: l.Event.Details}, nil
}

// Hash is the leaf hash the line states.
func (l Line) Hash() (tlog.Hash, error) {
	h, err := tlog.ParseHash(l.LeafHash)
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("its leafHash is not a base64 SHA-256 hash")
	}
	return h, nil
}
