package fencing

import (
	"context"
	"time"
)

// Observer is told what the worker does (metrics implement it; this package knows no
// metrics library). Its methods must be quick and safe for concurrent use.
type Observer interface {
	// Leading: this worker took the fence lease (true) or let it go (false).
	Leading(leading bool)
	// Lease: this worker leads with the fence lease's epoch, renewed at renewed; epoch 0
	// once it stopped leading.
	Lease(epoch int64, renewed time.Time)
	// Recorded: this worker appended a fence event (a decision, an outcome, an outage).
	Recorded(e Event)
	// RoundDone: a round ended; err is why it failed.
	RoundDone(err error)
	// NoQuorum: since when the cluster's Incus has had no quorum, as its round saw it; zero
	// while it has.
	NoQuorum(cluster string, since time.Time)
	// Paused: why fencing is paused in the cluster after its round ("" while it acts).
	Paused(cluster string, reason string)
}

func (w *Worker) observer() Observer {
	if w.Observer == nil {
		return nobody{}
	}
	return w.Observer
}

type nobody struct{}

func (nobody) Leading(bool)               {}
func (nobody) Lease(int64, time.Time)     {}
func (nobody) Recorded(Event)             {}
func (nobody) RoundDone(error)            {}
func (nobody) NoQuorum(string, time.Time) {}
func (nobody) Paused(string, string)      {}

// observedLease tells the observer of every event appended through the leader
// connection, the one place every fence event is written.
type observedLease struct {
	Lease
	obs Observer
}

func (s observedLease) Append(ctx context.Context, e Event) (Event, error) {
	out, err := s.Lease.Append(ctx, e)
	if err == nil {
		s.obs.Recorded(out)
	}
	return out, err
}

func (s observedLease) SaveTracking(ctx context.Context, cluster int64, next []Tracking, gone []string, events []Event) ([]Event, error) {
	out, err := s.Lease.SaveTracking(ctx, cluster, next, gone, events)
	if err == nil {
		for _, e := range out {
			s.obs.Recorded(e)
		}
	}
	return out, err
}
