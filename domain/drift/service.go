package drift

import (
	"context"
	"strconv"
	"strings"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/broadcast"
)

// Store is what the API reads of drift. Every replica reads the same rows.
type Store interface {
	// Drifts returns the raised drift of every machine (machine "" ) or of one, ordered by
	// machine and check: one query whatever the fleet's size.
	Drifts(ctx context.Context, machine string) ([]State, error)
	// EventsAfter returns up to limit events with an id above after, oldest first, of one
	// machine or (machine "") of all.
	EventsAfter(ctx context.Context, machine string, after int64, limit int) ([]Event, error)
	// Watcher returns the leading runner's last status, or nil when none ever ran.
	Watcher(ctx context.Context) (*Watcher, error)
}

// Feed is where drift events are published as they are recorded, on every replica, keyed
// by machine.
type Feed = *broadcast.Hub[string, Event]

// Service is drift as the API serves it.
type Service struct {
	Store Store
	Feed  Feed
}

func validMachine(field, name string) error {
	if name == "" {
		return nil
	}
	if err := machines.ValidateName(name); err != nil {
		if e, ok := apperr.As(err); ok {
			return &apperr.Error{Code: e.Code, Field: field, Message: e.Message}
		}
		return err
	}
	return nil
}

// List returns the raised drift, of one machine or (machine "") of all.
func (s *Service) List(ctx context.Context, machine string) ([]State, error) {
	if err := validMachine("machine", machine); err != nil {
		return nil, err
	}
	return s.Store.Drifts(ctx, machine)
}

// Watcher returns the leading runner's last status, or nil when none ever ran.
func (s *Service) Watcher(ctx context.Context) (*Watcher, error) {
	return s.Store.Watcher(ctx)
}

// Changes says what a driftChanges subscriber receives from the feed: raises and clears,
// of one machine or (machine "") of all, those after the event id after (when given)
// first, read from the store, then live ones, without gaps or repeats; one that falls
// behind catches up from the store. Subscribe with broadcast.Subscribe on Feed.
func (s *Service) Changes(machine string, after *int64) (broadcast.Want[string, Event], error) {
	if err := validMachine("machine", machine); err != nil {
		return broadcast.Want[string, Event]{}, err
	}
	return broadcast.Want[string, Event]{Key: machine, All: machine == "", After: after,
		Replay: func(ctx context.Context, after int64, limit int) ([]Event, error) {
			return s.Store.EventsAfter(ctx, machine, after, limit)
		}}, nil
}

// ParseEventID reads an event id given by a client (field names the argument).
func ParseEventID(field, s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || id < 0 {
		return 0, apperr.Invalid(field, "%s is not a drift event id (a whole number, as DriftEvent.id gives it)", apperr.Quote(s))
	}
	return id, nil
}
