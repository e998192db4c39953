package app

import (
	"context"
	"os"
	"os/user"
	"strconv"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
)

// LocalCaller is the administrator running `apelora identity …` on the server itself:
// recorded as local:USER (a name no identity can have). Whoever can reach the database
// may do anything, so the rules that protect the API (the last manager, granting only
// what one holds) do not bind it.
func LocalCaller() identity.Caller {
	name := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return identity.Caller{Name: "local:" + name}
}

// OnServer runs an identity change made on the server's command line as an audited
// action, as the API's gate does for mutations: exactly one audit event, written in the
// change's transaction when it succeeds and on its own when it does not.
func OnServer(ctx context.Context, store *postgres.Store, by identity.Caller, action string, params map[string]any, fn func(ctx context.Context) error) error {
	a := &audit.Action{Actor: by.Name, Name: action, RequestID: logging.NewRequestID(), Parameters: audit.Redact(params)}
	err := fn(audit.WithAction(ctx, a))
	if a.Recorded() {
		return err
	}
	if err == nil {
		// Every change records its event in its own transaction; reaching here is a
		// programming error, but the trail must stay complete.
		return store.RecordAudit(context.WithoutCancel(ctx), a.Event(audit.Succeeded, ""))
	}
	// Nothing was changed. If even the event cannot be written the database is
	// unreachable, and the change's own error already says so.
	_ = store.RecordAudit(context.WithoutCancel(ctx), a.Event(audit.OutcomeOf(err), apperr.PublicMessage(err)))
	return err
}
