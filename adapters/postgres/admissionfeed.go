package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/apelora/fabric/admission"
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

// AdmissionFeed decodes admission events once per process and hands each to the
// subscribers of its machine only (see broadcast.Topics: no goroutine per subscriber).
type AdmissionFeed struct {
	s *Store
	t broadcast.Topics[string, *admission.Event]
}

// NewAdmissionFeed returns a feed; call Run with the listener.
func (s *Store) NewAdmissionFeed() *AdmissionFeed { return &AdmissionFeed{s: s} }

// ByMachine is the feed's subscribers, keyed by machine: subscribe with broadcast.Subscribe
// to get the events published from then on for one machine, in order. The events are
// shared by all subscribers and must not be changed.
func (f *AdmissionFeed) ByMachine() *broadcast.Topics[string, *admission.Event] { return &f.t }

// Run forwards events until ctx ends.
func (f *AdmissionFeed) Run(ctx context.Context, l *Listener) {
	sub := l.Subscribe(AdmissionChannel, 4096)
	defer func() { sub.Close() }()
	for {
		select {
		case <-ctx.Done():
			return
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
			f.t.Publish(e.Machine, e)
		}
	}
}
