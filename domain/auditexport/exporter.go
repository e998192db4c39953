package auditexport

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/leader"
)

// Trail is what the exporter reads of the audit log.
type Trail interface {
	// AuditLeavesFrom reads up to limit events from leaf index from on, in leaf order.
	AuditLeavesFrom(ctx context.Context, from int64, limit int) ([]auditlog.StoredEvent, error)
	// AuditTreeSize is the number of leaves committed.
	AuditTreeSize(ctx context.Context) (int64, error)
	// LatestAuditCheckpoint is the checkpoint of the largest tree, or nil.
	LatestAuditCheckpoint(ctx context.Context) (*auditlog.Checkpoint, error)
}

// Sink is one destination. Deliver returns nil only once every line is acknowledged as
// the sink defines it (a file: written and synced; syslog over TCP: written, every byte
// acknowledged by the receiver's TCP, on a connection still up afterwards); on an error
// none of them counts as delivered and the same lines (and the ones after) are sent again.
// A sink is used by one goroutine at a time.
type Sink interface {
	// Name identifies the destination: its progress is kept under it, so a new
	// destination starts from the first event.
	Name() string
	// Kind is the metric's label: syslog or jsonl.
	Kind() string
	Deliver(ctx context.Context, lines [][]byte) error
	// Close drops any connection or file; the next Deliver opens it again.
	Close() error
}

// Progress is one sink's lease as its exporter holds it, and the sink's position: the next
// leaf index to send. Writes go through it, so a replica that lost the lease moves
// nothing.
type Progress interface {
	leader.Lease
	Next(ctx context.Context) (int64, error)
	Acknowledge(ctx context.Context, next int64) error
}

// Leadership hands out one sink's lease; TryLead returns nil when another replica exports
// to that sink.
type Leadership interface {
	TryLead(ctx context.Context, sink string) (Progress, error)
}

// Observer is told each sink's lag: events in the trail not yet acknowledged by it.
type Observer interface {
	ExportLag(kind string, events int64)
}

// Defaults: how often a leader looks for new events, how many it sends at once.
const (
	DefaultInterval = time.Second
	DefaultBatch    = 500
	maxRetry        = 30 * time.Second
)

// Exporter sends the trail to one sink, in leaf order, at least once: it leads the sink
// in one replica at a time, reads the next leaf index from the database, delivers a batch
// and only then stores the index after it. Nothing waits on it: mutations write the trail,
// the exporter reads it.
type Exporter struct {
	Trail      Trail
	Sink       Sink
	Leadership Leadership
	Observer   Observer // nil: none
	Interval   time.Duration
	Batch      int
	// Lease is the sink's lease length (leader.Options.Lease): renewed every third of it;
	// an exporter that lost it stops moving the sink's position.
	Lease time.Duration
	Log   *slog.Logger
}

// Run exports until ctx ends.
func (e *Exporter) Run(ctx context.Context) {
	if e.Interval <= 0 {
		e.Interval = DefaultInterval
	}
	if e.Batch <= 0 {
		e.Batch = DefaultBatch
	}
	name := e.Sink.Name()
	leader.Run(ctx, func(ctx context.Context) (Progress, error) { return e.Leadership.TryLead(ctx, name) }, e.lead, leader.Options{
		Retry:       min(max(e.Interval, time.Second), 10*time.Second),
		Lease:       e.Lease,
		Log:         e.Log,
		Unreachable: "audit export: could not ask PostgreSQL who exports; trying again",
		Standby:     "audit export: another replica exports to this sink; standing by",
		Attrs:       []any{"sink", name},
	})
}

func (e *Exporter) lag(n int64) {
	if e.Observer != nil {
		e.Observer.ExportLag(e.Sink.Kind(), n)
	}
}

// lead exports while p holds the sink's lease.
func (e *Exporter) lead(ctx context.Context, p Progress) {
	name := e.Sink.Name()
	defer e.Sink.Close()
	defer e.lag(0) // the replica that leads next reports it
	next, err := p.Next(ctx)
	if err != nil {
		e.Log.Warn("audit export: could not read where this sink stopped; trying again", "sink", name, "error", apperr.Text(err))
		return
	}
	e.Log.Info("audit export: exporting", "sink", name, "from_leaf", next)
	retry := e.Interval
	var sentCheckpoint int64 // the largest checkpoint sent (carried by an event, or alone)
	var down time.Time       // when the sink stopped taking events; zero while it takes them
	for ctx.Err() == nil {
		if err := p.Check(ctx); err != nil {
			e.Log.Warn("audit export: lost the sink's lease; standing by", "sink", name, "error", err)
			return
		}
		events, size, cp, err := e.read(ctx, next)
		if err != nil {
			if ctx.Err() == nil {
				e.Log.Warn("audit export: could not read the audit trail; trying again", "sink", name, "error", apperr.Text(err))
			}
			_ = leader.Sleep(ctx, e.Interval)
			continue
		}
		e.lag(size - next)
		if len(events) == 0 {
			if cp != nil && cp.Size > sentCheckpoint && cp.Size <= next {
				// Caught up, and a newer checkpoint covers what was sent: send it on its
				// own, so the far side proves the last events now, not at the next event.
				b, err := json.Marshal(CheckpointLine{Checkpoint: cp.Signed})
				if err == nil {
					err = e.Sink.Deliver(ctx, [][]byte{b})
				}
				if err == nil {
					sentCheckpoint = cp.Size
					continue
				}
				_ = e.Sink.Close()
			}
			_ = leader.Sleep(ctx, e.Interval)
			continue
		}
		if first := events[0].LeafIndex; first != next {
			// Rows deleted in the database: say so, and export what is there; the far
			// side's verify names the gap too.
			e.Log.Error("audit export: leaves are missing from the trail (deleted in the database); run `apelora audit verify`",
				"sink", name, "expected_leaf", next, "found_leaf", first)
		}
		lines := make([][]byte, 0, len(events))
		for _, ev := range events {
			b, err := Encode(ev, cp)
			if err != nil {
				e.Log.Error("audit export: could not encode an event", "sink", name, "error", err)
				return
			}
			lines = append(lines, b)
		}
		if err := e.Sink.Deliver(ctx, lines); err != nil {
			_ = e.Sink.Close()
			if ctx.Err() != nil {
				return
			}
			if down.IsZero() {
				down = time.Now()
				e.Log.Warn("audit export: the sink does not take events; nothing is lost, delivery resumes from the first unacknowledged event when it is back",
					"sink", name, "from_leaf", next, "error", err.Error())
			}
			_ = leader.Sleep(ctx, retry)
			retry = min(retry*2, maxRetry, max(5*e.Interval, time.Second))
			continue
		}
		after := events[len(events)-1].LeafIndex + 1
		if err := p.Acknowledge(ctx, after); err != nil {
			// Delivered but not recorded: the next leader sends these again (at least once).
			e.Log.Warn("audit export: could not record the sink's progress; standing by", "sink", name, "error", apperr.Text(err))
			return
		}
		if !down.IsZero() {
			e.Log.Info("audit export: the sink takes events again", "sink", name, "down_for", time.Since(down).Round(time.Millisecond).String(), "lag", size-after)
			down = time.Time{}
		}
		retry = e.Interval
		next = after
		if cp != nil {
			sentCheckpoint = max(sentCheckpoint, cp.Size)
		}
		e.lag(max(size-next, 0))
	}
}

// read takes the next batch, the tree's size and the latest checkpoint.
func (e *Exporter) read(ctx context.Context, next int64) ([]auditlog.StoredEvent, int64, *auditlog.Checkpoint, error) {
	events, err := e.Trail.AuditLeavesFrom(ctx, next, e.Batch)
	if err != nil {
		return nil, 0, nil, err
	}
	size, err := e.Trail.AuditTreeSize(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	// The checkpoint is read after the events: it is the latest when they are sent.
	cp, err := e.Trail.LatestAuditCheckpoint(ctx)
	return events, size, cp, err
}
