package identity

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
)

// SSO sessions follow the identity provider: a signed-in user's groups are asked for again
// with the session's refresh token once half the re-check interval has passed since they
// were last confirmed, by whichever replica claims the session first:
//
//   - the same groups: confirmed again for the interval;
//   - other groups: the identity's groups and permissions are set to them in an audited
//     change (ssoGroupsChanged), which every replica hears (NOTIFY) and re-authorises the
//     identity's open websockets with: a demotion takes effect at once, on every request
//     and socket;
//   - groups that grant nothing, a refresh token the provider refuses (the grant revoked,
//     the user disabled), an answer about another user, a kept token that does not open:
//     the session ends (all of the user's sessions when its groups grant nothing), audited
//     (ssoSessionEnded), its websockets closed with 4403 and the reason as on sign-out;
//   - no answer: nothing changes and the session is asked again shortly; the groups hold
//     until their confirmation lapses (Identity.Granted), then the identity has view-only
//     access until the provider answers again.

// The audit actions of re-checks; their actor is the identity.
const (
	// ActionSSOGroupsChanged: the provider named other groups for a signed-in user than
	// the ones kept, so its permissions changed (details: subject, issuer, and the groups
	// and permissions before and after).
	ActionSSOGroupsChanged = "ssoGroupsChanged"
	// ActionSSOSessionEnded: a session the provider would not confirm again was ended
	// (details: the session, why).
	ActionSSOSessionEnded = "ssoSessionEnded"
)

const (
	// recheckBatch is how many sessions one claim takes, all asked about at once; the
	// round claims again until none is due.
	recheckBatch = 8
	// recheckAsk bounds one question to the provider (its HTTP client's timeout,
	// APELORA_REQUEST_TIMEOUT, usually ends it first).
	recheckAsk = time.Minute
	// recheckHold is how long a replica's claim on a session lasts: past it (the replica
	// died while asking) another replica takes the session. Well past recheckAsk: two
	// replicas asking with one refresh token at once would end the session, as a provider
	// that rotates its tokens refuses the second.
	recheckHold = 5 * time.Minute
)

// recheckTick is how often a replica looks for sessions due: a tenth of the interval,
// from 100 ms to 30 s.
func (s *SSO) recheckTick() time.Duration {
	return min(max(s.recheck()/10, 100*time.Millisecond), 30*time.Second)
}

// retryIn is when a session whose provider did not answer is asked again: within the
// interval's last half, so that a provider back in time confirms the groups before they
// lapse.
func (s *SSO) retryIn() time.Duration {
	return max(s.recheck()/10, 100*time.Millisecond)
}

// RunRechecks asks the provider again about the sessions due, on every replica, until ctx
// ends. Without a sealer there is nothing to ask with.
func (s *SSO) RunRechecks(ctx context.Context) {
	if s == nil || s.Tokens == nil {
		return
	}
	t := time.NewTicker(s.recheckTick())
	defer t.Stop()
	for {
		s.RecheckDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RecheckDue asks the provider about every session due that this replica claims (those
// sealed with its key), and returns how many it asked about.
func (s *SSO) RecheckDue(ctx context.Context) int {
	n := 0
	for ctx.Err() == nil {
		grants, err := s.Store.ClaimSSOGrants(ctx, s.Tokens.KeyID(), recheckHold, recheckBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log().WarnContext(ctx, "could not read the SSO sessions due for a check with the identity provider", "error", err)
			}
			return n
		}
		var wg sync.WaitGroup
		for _, g := range grants {
			wg.Go(func() { s.recheckOne(ctx, g) })
		}
		wg.Wait()
		n += len(grants)
		if len(grants) < recheckBatch {
			break
		}
	}
	return n
}

// recheckOne asks the provider about one session and acts on the answer (see above).
func (s *SSO) recheckOne(ctx context.Context, g SSOGrant) {
	id := &g.Identity
	if id.SSO == nil {
		return
	}
	ctx = logging.WithRequestID(ctx, logging.NewRequestID())
	log := s.log().With("identity", id.Name, "session", g.ConsoleSession)
	token, err := s.Tokens.Open(g.Sealed, g.ConsoleSession)
	if err != nil {
		log.ErrorContext(ctx, "the identity provider's refresh token kept for an SSO session does not open (changed or moved in the database): the session is ended", "error", err)
		s.endSessions(ctx, id, g.ConsoleSession, "the identity provider's refresh token kept for this session does not open (it was changed in the database): sign in again", nil)
		return
	}
	actx, cancel := context.WithTimeout(ctx, recheckAsk)
	claims, next, err := s.Provider.Refresh(actx, token)
	cancel()
	if err != nil {
		if c := apperr.CodeOf(err); c == apperr.Unauthenticated || c == apperr.Forbidden {
			why := apperr.PublicMessage(err)
			log.InfoContext(ctx, "the identity provider no longer accepts an SSO session: it is ended", "reason", why)
			s.endSessions(ctx, id, g.ConsoleSession, "the identity provider no longer accepts this sign-in ("+why+")", nil)
			return
		}
		log.WarnContext(ctx, "could not ask the identity provider about an SSO session's groups: they hold until their confirmation lapses, then the identity has view-only access until the provider answers",
			"confirmed_until", id.SSO.ConfirmedUntil, "error", err)
		if err := s.Store.ConfirmSSOGrant(ctx, g.ConsoleSession, nil, s.retryIn()); err != nil {
			log.WarnContext(ctx, "could not release an SSO session's check", "error", err)
		}
		return
	}
	if claims.Issuer != id.SSO.Issuer || claims.Subject != id.SSO.Subject {
		log.ErrorContext(ctx, "the identity provider answered an SSO session's refresh token for another user: the session is ended", "subject", claims.Subject)
		s.endSessions(ctx, id, g.ConsoleSession, "the identity provider answered this sign-in's refresh token for another user", nil)
		return
	}
	var sealed []byte
	if !next.IsZero() {
		// The provider rotated the token: the old one no longer works, so the new one must
		// be kept, or the next check fails and ends the session.
		if sealed, err = s.Tokens.Seal(next, g.ConsoleSession); err != nil {
			log.ErrorContext(ctx, "could not seal the identity provider's new refresh token: the session is ended", "error", err)
			s.endSessions(ctx, id, g.ConsoleSession, "the identity provider's new refresh token could not be kept", nil)
			return
		}
	}
	perms, noAccess := s.Groups.Grant(claims.Groups)
	switch {
	case noAccess != nil:
		// No group grants anything any more: none of the user's sessions goes on.
		log.InfoContext(ctx, "an SSO user's groups no longer grant access to Apelora: its sessions are ended", "groups", claims.Groups)
		s.endSessions(ctx, id, 0, apperr.PublicMessage(noAccess), claims)
		return
	default:
		same, err := s.Store.ConfirmSSOGroups(ctx, id.ID, claims.Groups, perms, s.recheck())
		if err == nil && !same {
			err = s.changeGroups(ctx, id, claims, perms)
		}
		if err != nil {
			log.WarnContext(ctx, "could not record what the identity provider said of an SSO user's groups; asking again shortly", "error", err)
			if err := s.Store.ConfirmSSOGrant(ctx, g.ConsoleSession, sealed, s.retryIn()); err != nil {
				log.ErrorContext(ctx, "could not keep an SSO session's refresh token", "error", err)
			}
			return
		}
	}
	if err := s.Store.ConfirmSSOGrant(ctx, g.ConsoleSession, sealed, s.recheck()/2); err != nil {
		log.ErrorContext(ctx, "could not keep an SSO session's refresh token: its next check will fail and end it", "error", err)
	}
}

// changeGroups sets the identity's groups and permissions to the provider's, audited as
// ssoGroupsChanged.
func (s *SSO) changeGroups(ctx context.Context, id *Identity, claims *SSOClaims, perms []Permission) error {
	a := &audit.Action{Actor: id.Name, Name: ActionSSOGroupsChanged, RequestID: logging.RequestID(ctx)}
	a.Detail("subject", claims.Subject)
	a.Detail("issuer", claims.Issuer)
	a.Detail("groups", claims.Groups)
	a.Detail("permissions", perms)
	var before *Identity
	err := s.Store.ChangeIdentities(audit.WithAction(ctx, a), func(tx Tx) error {
		var err error
		before, err = tx.SetSSOGroups(ctx, id.ID, claims.Groups, perms, s.recheck())
		if err == nil && before == nil {
			return errUnchanged // another session of the user got there first
		}
		if err == nil {
			err = s.setGroupGrants(ctx, tx, before, claims.Groups)
		}
		if before != nil {
			a.Detail("groupsBefore", groupsOf(before))
			a.Detail("permissionsBefore", before.Permissions)
		}
		return err
	})
	if err == errUnchanged {
		return nil
	}
	if err == nil {
		s.log().InfoContext(ctx, "the identity provider changed an SSO user's groups, and so its permissions", "identity", id.Name,
			"groups_before", groupsOf(before), "groups", claims.Groups, "permissions_before", before.Permissions, "permissions", perms)
	}
	return err
}

var errUnchanged = apperr.New(apperr.Busy, "unchanged")

func groupsOf(id *Identity) []string {
	if id == nil || id.SSO == nil {
		return nil
	}
	return slices.Clone(id.SSO.Groups)
}

// endSessions ends the session (or, with only zero, every session of the identity), in an
// audited change (ssoSessionEnded) that, with claims (groups that grant nothing), also
// sets the identity's groups and permissions to the provider's.
func (s *SSO) endSessions(ctx context.Context, id *Identity, only int64, why string, claims *SSOClaims) {
	a := &audit.Action{Actor: id.Name, Name: ActionSSOSessionEnded, RequestID: logging.RequestID(ctx)}
	a.Detail("subject", id.SSO.Subject)
	a.Detail("issuer", id.SSO.Issuer)
	a.Detail("reason", why)
	if only != 0 {
		a.Detail("session", only)
	}
	err := s.Store.ChangeIdentities(audit.WithAction(ctx, a), func(tx Tx) error {
		var before *Identity
		if claims != nil {
			a.Detail("groups", claims.Groups)
			var err error
			if before, err = tx.SetSSOGroups(ctx, id.ID, claims.Groups, []Permission{}, s.recheck()); err != nil {
				return err
			}
			if err := tx.SetClusterGrants(ctx, id.ID, nil); err != nil {
				return err
			}
		}
		n, err := tx.EndConsoleSessions(ctx, id.ID, only)
		if err == nil && n == 0 && before == nil {
			return errUnchanged // another check (of another of the user's sessions) did it
		}
		a.Detail("sessionsEnded", n)
		return err
	})
	if err == errUnchanged {
		return
	}
	if err != nil {
		s.log().ErrorContext(ctx, "could not end an SSO session the identity provider would not confirm; it keeps the groups it had until they lapse", "identity", id.Name, "error", err)
	}
}
