// Package resolvers holds the thin GraphQL resolvers: parse the arguments, call a domain
// package, map the result. Authorisation of every mutation and its audit event happen
// around them (see package server); domain rules live in the domain packages.
package resolvers

import (
	"context"
	"log/slog"

	"github.com/apelora/fabric/audit"
	"github.com/apelora/fabric/fleet"
	"github.com/apelora/fabric/internal/broadcast"
	"github.com/apelora/fabric/machines"
)

// AuditTrail reads the audit trail.
type AuditTrail interface {
	AuditEvents(ctx context.Context, f audit.Filter) ([]audit.Event, error)
}

// AuditFeed streams audit events as they are recorded.
type AuditFeed interface {
	Subscribe(buffer int) *broadcast.Subscription[audit.Event]
}

// Resolver carries the domain services the resolvers call.
type Resolver struct {
	Machines  *machines.Service
	Fleet     *fleet.Service
	Audit     AuditTrail
	AuditFeed AuditFeed
	Log       *slog.Logger
}
