package resolvers

import (
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/drift"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/internal/broadcast"
)

// Every subscription resolver hands gqlgen a channel from broadcast.Subscribe: the hub
// writes to it with no goroutine per subscriber, and each event is mapped once for all
// subscribers through these views (they share the model, which gqlgen only reads).
var (
	admissionEvents = broadcast.NewView(mapAdmissionEvent)
	auditEvents     = broadcast.NewView(func(e audit.Event) *model.AuditEvent { return mapAuditEvent(&e) })
	fenceEvents     = broadcast.NewView(func(e fencing.Event) *model.FenceEvent { return mapFenceEvent(&e) })
	driftEvents     = broadcast.NewView(func(e drift.Event) *model.DriftEvent { return mapDriftEvent(&e) })
)

// admissionBuffer is how many events an admissionChecks subscriber may fall behind before
// it is dropped: a report publishes ten, so this is several reports' worth. The buffer
// holds pointers (8 bytes each).
const admissionBuffer = 64

// streamBuffer is how many events an auditEventRecorded, fenceProgress or driftChanges
// subscriber may fall behind before it catches up from the table instead of being written to.
const streamBuffer = 64
