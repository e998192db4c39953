package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/internal/broadcast"
)

// AdmissionChannel carries admission check events between API replicas.
const AdmissionChannel = "admission_checks"

// AdmissionPublisher publishes admission check events with NOTIFY: the event travels as
// the payload, so a subscriber on any replica gets it without reading the database.
func (s *Store) AdmissionPublisher() admission.Publisher { return admissionPublisher{s} }

type admissionPublisher struct{ s *Store }

func (p admissionPublisher) Publish(ctx context.Context, e admission.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if len(b) > 7900 {
		return fmt.Errorf("admission event for %s is %d bytes, over NOTIFY's limit", e.Machine, len(b))
	}
	return p.s.Notify(ctx, AdmissionChannel, string(b))
}

// AdmissionFeed decodes admission events once per process and publishes each on its hub,
// keyed by machine. Admission events are not stored: a subscriber gets those published
// from when it subscribes, and one that falls behind is dropped (a report can be run
// again).
type AdmissionFeed struct {
	s   *Store
	hub *broadcast.Hub[string, *admission.Event]
}

// NewAdmissionFeed returns a feed; call Run with the listener.
func (s *Store) NewAdmissionFeed() *AdmissionFeed {
	return &AdmissionFeed{s: s, hub: broadcast.NewHub[string, *admission.Event](nil, 0)}
}

// Hub is where the events are published, keyed by machine: subscribe with
// broadcast.Subscribe. The events are shared by all subscribers and must not be changed.
func (f *AdmissionFeed) Hub() *broadcast.Hub[string, *admission.Event] { return f.hub }

// AdmissionBatchWindow is how long the feed holds a run's first new result for others of
// the same run before pushing them together. A report computes its eleven results within
// a few tens of milliseconds: one message or two per watcher instead of twelve, which is
// what lets a thousand watchers keep up. The verdict is never held.
const AdmissionBatchWindow = 25 * time.Millisecond

// Run forwards events until ctx ends.
func (f *AdmissionFeed) Run(ctx context.Context, l *Listener) {
	sub := l.Subscribe(AdmissionChannel, 4096)
	defer func() { sub.Close() }()
	b := runBatcher{window: AdmissionBatchWindow, pending: map[runKey]*pendingRun{}}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	publish := func(events []*admission.Event) {
		for _, e := range events {
			f.hub.Publish(e.Machine, e)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-timer.C:
			publish(b.due(now))
		case n, ok := <-sub.C:
			if !ok {
				// Fell behind: results in between are lost to live watchers (a report can be
				// run again); keep listening.
				f.s.log.Warn("admission events fell behind; some were not pushed")
				sub = l.Subscribe(AdmissionChannel, 4096)
				continue
			}
			if n.Resync {
				continue
			}
			e := new(admission.Event)
			if err := json.Unmarshal([]byte(n.Payload), e); err != nil {
				f.s.log.Warn("undecodable admission event", "error", err)
				continue
			}
			publish(b.add(e, time.Now()))
		}
		if next, ok := b.next(); ok {
			timer.Reset(time.Until(next))
		}
	}
}

type runKey struct{ machine, run string }

type pendingRun struct {
	event *admission.Event
	due   time.Time
}

// runBatcher merges the events of one run that arrive within a window of its first
// pending one; a verdict flushes its run at once.
type runBatcher struct {
	window  time.Duration
	pending map[runKey]*pendingRun
}

// add takes one event and returns the events to publish now.
func (b *runBatcher) add(e *admission.Event, now time.Time) []*admission.Event {
	k := runKey{e.Machine, e.RunID}
	p, ok := b.pending[k]
	if !ok {
		p = &pendingRun{event: e, due: now.Add(b.window)}
		b.pending[k] = p
	} else {
		p.event.Checks = append(p.event.Checks, e.Checks...)
		p.event.At = e.At
		if e.Verdict != "" {
			p.event.Verdict = e.Verdict
		}
	}
	if p.event.Verdict != "" {
		delete(b.pending, k)
		return []*admission.Event{p.event}
	}
	return nil
}

// due returns (and forgets) the runs whose window has passed by now.
func (b *runBatcher) due(now time.Time) []*admission.Event {
	var out []*admission.Event
	for k, p := range b.pending {
		if !p.due.After(now) {
			out = append(out, p.event)
			delete(b.pending, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// next is when the earliest pending run is due.
func (b *runBatcher) next() (time.Time, bool) {
	var first time.Time
	for _, p := range b.pending {
		if first.IsZero() || p.due.Before(first) {
			first = p.due
		}
	}
	return first, !first.IsZero()
}
