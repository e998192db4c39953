package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/drift"
)

// The drift watcher runs in the API replicas, not in apelora-worker: its checks read MAAS
// (hardware tests, inventory) with the API's read-only key, run without MAAS too (the
// worker needs MAAS to start at all), and the worker, which holds the power key, stays as
// small as fencing needs. One replica leads at a time (its own lease, role "drift").

// startDrift runs the drift watcher on this replica until ctx ends: it leads when no other
// replica does. The checker is admission's own (with MAAS when configured).
func startDrift(ctx context.Context, cfg Config, store *postgres.Store, events *incusEvents, checker *admission.Checker, log *slog.Logger) {
	host, _ := os.Hostname()
	replica := fmt.Sprintf("%s-%d", host, os.Getpid())
	r := &drift.Runner{
		Checker: checker, Admissions: store.Drift(), Records: store.Machines(),
		Leadership: store.DriftLeadership("apelora drift "+replica, cfg.leaderLease()),
		Lease:      cfg.leaderLease(), Leading: cfg.Metrics.Lease,
		Changes:  &incusChanges{events: events, log: log, last: "not connected yet"},
		Interval: cfg.DriftInterval, Limits: drift.Limits{OfflineAfter: cfg.DriftOfflineAfter},
		Replica: replica, Log: log,
	}
	go func() { _ = r.Run(ctx) }()
}

// incusChanges turns Incus lifecycle events into what drift looks at: the member updated
// (scheduler.instance, roles …), added or removed; every member when a storage pool or a
// network changed, and after (re)connecting, since events may have been missed.
type incusChanges struct {
	events *incusEvents
	log    *slog.Logger

	mu   sync.Mutex
	last string // last problem logged, to log each once
}

var _ drift.Changes = (*incusChanges)(nil)

func (w *incusChanges) Watch(ctx context.Context, changed func(member string)) {
	w.events.follow(ctx, incus.LifecycleWatch{
		Connected: func() {
			w.note("")
			changed("")
		},
		Event: func(e incus.LifecycleEvent) {
			if member, ok := driftConcerns(e); ok {
				changed(member)
			}
		},
		Lost: func(err error, _ time.Duration) { w.note(err.Error()) },
	})
}

func (w *incusChanges) note(problem string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if problem == w.last {
		return
	}
	w.last = problem
	if problem != "" {
		w.log.Warn("drift: Incus event stream lost; members are still re-checked on the interval", "problem", problem)
	} else {
		w.log.Info("drift: following Incus lifecycle events")
	}
}

// driftConcerns says whether a lifecycle event can change a drift check, and of which
// member ("" for all).
func driftConcerns(e incus.LifecycleEvent) (string, bool) {
	switch {
	case e.Action == incus.ActionMemberUpdated, e.Action == incus.ActionMemberAdded, e.Action == incus.ActionMemberRemoved:
		if m := e.Member(); m != "" {
			return m, true
		}
		return "", true
	case strings.HasPrefix(e.Action, "storage-pool-"), strings.HasPrefix(e.Action, "network-"):
		return "", true
	}
	return "", false
}
