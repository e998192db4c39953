package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/internal/broadcast"
)

// The fleet stream's settings and triggers (see fleet.Watcher).

const (
	EnvFleetRefreshInterval = "APELORA_FLEET_REFRESH_INTERVAL"
	minFleetRefresh         = time.Second
	maxFleetRefresh         = 24 * time.Hour
)

func fleetRefreshInterval(get func(string, string) string) (time.Duration, error) {
	return boundedDuration(EnvFleetRefreshInterval, get(EnvFleetRefreshInterval, fleet.DefaultRefreshInterval.String()),
		minFleetRefresh, maxFleetRefresh, fleet.DefaultRefreshInterval, "how often fleetUpdates reads MAAS and Incus while anyone subscribes")
}

// hubTrigger follows the events of a hub that match (every one when match is nil): audit
// events of mutations, on any replica; drift; fence events. A follower that falls behind
// is dropped by the hub: it follows again and counts that as a change.
func hubTrigger[K comparable, V any](h *broadcast.Hub[K, V], match func(V) bool) fleet.Trigger {
	seen := broadcast.NewView(func(V) struct{} { return struct{}{} })
	return func(ctx context.Context, changed func()) {
		for ctx.Err() == nil {
			for range broadcast.Subscribe(ctx, h, broadcast.Want[K, V]{All: true, Match: match}, seen, 64) {
				changed()
			}
			changed()
		}
	}
}

// mayHaveChanged keeps the audit events of mutations that may have changed something: a
// success, or a failure (a step in Incus or MAAS may have happened). Refused requests
// change nothing, and anyone can cause them: they must not make the fleet be read.
func mayHaveChanged(e audit.Event) bool {
	return e.Outcome == audit.Succeeded || e.Outcome == audit.Failed
}

// incusTrigger follows Incus's lifecycle events that change fleet rows: members added,
// updated or removed, join tokens created or cancelled (a revoked token is a cancelled
// operation). After each (re)connection the fleet is read again: events may have been
// missed.
func incusTrigger(events *incusEvents, log *slog.Logger) fleet.Trigger {
	return func(ctx context.Context, changed func()) {
		lost := false
		events.follow(ctx, incus.LifecycleWatch{
			Connected: func() {
				if lost {
					log.Info("fleet stream: following Incus lifecycle events again")
				}
				lost = false
				changed()
			},
			Event: func(e incus.LifecycleEvent) {
				if fleetConcerns(e) {
					changed()
				}
			},
			Lost: func(err error, _ time.Duration) {
				if !lost {
					log.Warn("fleet stream: Incus event stream lost; the fleet is still read on the interval", "problem", err.Error())
				}
				lost = true
			},
		})
	}
}

// fleetConcerns says whether a lifecycle event can change a fleet row.
func fleetConcerns(e incus.LifecycleEvent) bool {
	switch e.Action {
	case incus.ActionMemberAdded, incus.ActionMemberUpdated, incus.ActionMemberRemoved,
		incus.ActionTokenCreated, actionOperationCancelled:
		return true
	}
	return false
}

// actionOperationCancelled is Incus's lifecycle action when an operation, such as a join
// token, is cancelled.
const actionOperationCancelled = "operation-cancelled"
