package identity

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// Tx is the part of a database transaction that identity changes need.
type Tx interface {
	InsertIdentity(ctx context.Context, name string, hash []byte, perms []Permission, expiresAt *time.Time) (*Identity, error)
	// IdentityByName returns the identity locked until the transaction ends, or nil.
	IdentityByName(ctx context.Context, name string) (*Identity, error)
	// Managers returns the identities that hold manage-infrastructure and are not
	// revoked, locked until the transaction ends, so that two revocations at once cannot
	// both leave none.
	Managers(ctx context.Context) ([]Identity, error)
	SetRevoked(ctx context.Context, id int64, by string, at time.Time) (*Identity, error)
	// ClusterIDs returns the record ids of the registered clusters among names (a name
	// registered by none is left out).
	ClusterIDs(ctx context.Context, names []string) (map[string]int64, error)
	// SetClusterGrants replaces the identity's grants in one cluster with grants.
	SetClusterGrants(ctx context.Context, id int64, grants []ClusterGrant) error
	// SignInSSO returns the identity of the SSO user c (found by issuer and subject), made
	// with name (or name and SubjectTag when taken) on its first sign-in, its groups and
	// permissions set to the ones of this sign-in and confirmed for confirmedFor. A
	// revoked identity is returned as it is.
	SignInSSO(ctx context.Context, name string, c SSOClaims, perms []Permission, confirmedFor time.Duration) (*Identity, error)
	// SetSSOGroups sets an SSO identity's groups and permissions as the provider named them
	// again, confirmed for confirmedFor, and returns it as it was before; nil when they
	// were already those (nothing is written then).
	SetSSOGroups(ctx context.Context, id int64, groups []string, perms []Permission, confirmedFor time.Duration) (before *Identity, err error)
	// EndConsoleSessions ends the console sessions of the identity (only the one with id
	// only, when it is not zero) and tells every replica, at commit, to close their
	// websockets; it returns how many it ended.
	EndConsoleSessions(ctx context.Context, identityID, only int64) (int, error)
}

// Directory is the identities as administrators manage them.
type Directory interface {
	// Identities returns every identity, revoked and expired ones included, oldest first.
	Identities(ctx context.Context) ([]Identity, error)
	// ChangeIdentities runs fn in one transaction that writes the audit event of the
	// change in progress (see audit.Action).
	ChangeIdentities(ctx context.Context, fn func(Tx) error) error
}

// Caller is who asks for a change: an identity over the API, or an administrator on the
// server itself (`apelora identity …`, Identity nil), who may do anything the database
// allows.
type Caller struct {
	// Name is recorded as revokedBy (and is the audit event's actor).
	Name     string
	Identity *Identity
}

// APICaller is an authenticated identity acting over the API.
func APICaller(id *Identity) Caller { return Caller{Name: id.Name, Identity: id} }

// Service applies the identity rules.
type Service struct {
	Store Directory
	Now   func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// NewIdentity is what an administrator gives to create an identity.
type NewIdentity struct {
	Name string
	// Permissions are its unscoped grants; Grants its grants in one cluster each
	// (permission@cluster; a grant there without a cluster is added to Permissions).
	Permissions []Permission
	Grants      []GrantText
	// At most one of ExpiresAt and ExpiresIn; neither means it never expires.
	ExpiresAt *time.Time
	// ExpiresIn is a duration from now: Go's form (36h, 90m) or whole days (30d).
	ExpiresIn string
}

// Create makes a new identity and returns it with its bearer token, which is shown once
// and never stored (only its hash is).
func (s *Service) Create(ctx context.Context, by Caller, in NewIdentity) (*Identity, string, error) {
	if err := ValidateName(in.Name); err != nil {
		return nil, "", err
	}
	unscoped, scoped := SplitGrants(in.Grants)
	unscoped = append(slices.Clone(in.Permissions), unscoped...)
	var perms []Permission
	var err error
	if len(unscoped) > 0 || len(scoped) == 0 {
		if perms, err = checkPermissions(unscoped); err != nil {
			return nil, "", err
		}
	}
	if scoped, err = checkGrants(perms, scoped); err != nil {
		return nil, "", err
	}
	if by.Identity != nil {
		// Granting is bounded by holding: otherwise a manager without hardware.delete
		// could mint an identity that has it.
		for _, p := range perms {
			if !by.Identity.Has(p) {
				return nil, "", apperr.New(apperr.Forbidden, "identity %q cannot grant %s, which it does not hold: ask an administrator who holds it, or create the identity on the server with `apelora identity create`", by.Identity.Name, p)
			}
		}
	}
	now := s.now()
	expires, err := expiry(in, now)
	if err != nil {
		return nil, "", err
	}
	token, hash, err := NewToken()
	if err != nil {
		return nil, "", err
	}
	if a := audit.ActionFrom(ctx); a != nil {
		a.Detail("identity", in.Name)
		if len(scoped) > 0 {
			texts := make([]string, len(scoped))
			for k, g := range scoped {
				texts[k] = g.String()
			}
			a.Detail("grants", texts)
		}
		if expires != nil {
			a.Detail("expiresAt", expires.UTC().Format(time.RFC3339))
		}
	}
	var created *Identity
	err = s.Store.ChangeIdentities(ctx, func(tx Tx) error {
		var err error
		grants, err := clusterGrants(ctx, tx, scoped)
		if err != nil {
			return err
		}
		if unknown := unknownIn(scoped, grants); len(unknown) > 0 {
			return &apperr.Error{Code: apperr.NotFound, Field: "grants", Message: "no registered cluster for the grant " + strings.Join(unknown, ", ") + ": grant in a cluster the clusters query lists (register it first with registerCluster)"}
		}
		if by.Identity != nil {
			for _, g := range grants {
				if !by.Identity.HasIn(g.Permission, g.Cluster) {
					return apperr.New(apperr.Forbidden, "identity %q cannot grant %s, which it does not hold: ask an administrator who holds it, or create the identity on the server with `apelora identity create`", by.Identity.Name, g)
				}
			}
		}
		if created, err = tx.InsertIdentity(ctx, in.Name, hash, perms, expires); err != nil || created == nil || len(grants) == 0 {
			return err
		}
		if err := tx.SetClusterGrants(ctx, created.ID, grants); err != nil {
			return err
		}
		created.Grants = grants
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if created == nil {
		return nil, "", nil // a dry run: nothing was created, so no token exists
	}
	return created, token, nil
}

// checkPermissions refuses permission sets that grant nothing usable, and returns the
// set sorted without repeats.
func checkPermissions(in []Permission) ([]Permission, error) {
	if len(in) == 0 {
		return nil, apperr.Invalid("permissions", "give at least one permission (for example manage-infrastructure)")
	}
	perms := slices.Clone(in)
	for _, p := range perms {
		if !slices.Contains(AllPermissions, p) {
			return nil, invalidPermission(string(p))
		}
	}
	slices.Sort(perms)
	perms = slices.Compact(perms)
	if slices.Contains(perms, HardwareDelete) && !slices.Contains(perms, ManageInfrastructure) {
		return nil, apperr.Invalid("permissions", "hardware.delete only widens manage-infrastructure (erase disks on release): without it the identity could do nothing; add manage-infrastructure, or leave hardware.delete out")
	}
	return perms, nil
}

func invalidPermission(s string) error {
	names := make([]string, len(AllPermissions))
	for i, p := range AllPermissions {
		names[i] = string(p)
	}
	return apperr.Invalid("permissions", "unknown permission %s: use one of %s", apperr.Quote(s), strings.Join(names, ", "))
}

// expiry resolves when a new identity expires (nil: never).
func expiry(in NewIdentity, now time.Time) (*time.Time, error) {
	switch {
	case in.ExpiresAt != nil && in.ExpiresIn != "":
		return nil, apperr.Invalid("expiresIn", "give expiresAt or expiresIn, not both")
	case in.ExpiresAt != nil:
		if !in.ExpiresAt.After(now) {
			return nil, apperr.Invalid("expiresAt", "expiry %s is not in the future: give a later time, or a duration such as 90d", in.ExpiresAt.UTC().Format(time.RFC3339))
		}
		at := in.ExpiresAt.UTC()
		return &at, nil
	case in.ExpiresIn != "":
		d, err := ParseLifetime(in.ExpiresIn)
		if err != nil {
			return nil, err
		}
		at := now.Add(d).UTC()
		return &at, nil
	}
	return nil, nil
}

// maxLifetimeDays bounds an expiry given in days, far beyond any sensible credential.
const maxLifetimeDays = 36500

// ParseLifetime reads a duration an administrator gives for an expiry: Go's form (12h,
// 90m, 1h30m) or whole days (30d). It must be positive.
func ParseLifetime(s string) (time.Duration, error) {
	bad := func() error {
		return apperr.Invalid("expiresIn", "expiry %s is not a duration: write it like 30d, 12h or 90m (or give an RFC 3339 time)", apperr.Quote(s))
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n > maxLifetimeDays {
			return 0, bad()
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad()
		}
	}
	if d <= 0 {
		return 0, apperr.Invalid("expiresIn", "expiry %s is not in the future: give a positive duration such as 30d", apperr.Quote(s))
	}
	return d, nil
}

// ExpiryFromFlag reads the command lines' --expires: an RFC 3339 time or a duration from
// now. The duration is left for the server to resolve against its own clock.
func ExpiryFromFlag(s string) (at *time.Time, in string) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return &t, ""
	}
	return nil, s
}

// Revoke ends an identity at once: its token is refused from now on, and its open
// websockets are closed on every replica. The row stays, so the list shows who revoked
// it and when.
//
// Over the API the last active identity with manage-infrastructure cannot be revoked:
// nobody could then manage anything until someone with access to the server creates a
// new one. On the server itself it can (that is where the way back is).
func (s *Service) Revoke(ctx context.Context, by Caller, name string) (*Identity, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if a := audit.ActionFrom(ctx); a != nil {
		a.Detail("identity", name)
	}
	now := s.now()
	var revoked *Identity
	err := s.Store.ChangeIdentities(ctx, func(tx Tx) error {
		// Managers first: the same lock order for every revocation.
		managers, err := tx.Managers(ctx)
		if err != nil {
			return err
		}
		cur, err := tx.IdentityByName(ctx, name)
		if err != nil {
			return err
		}
		if cur == nil {
			return apperr.New(apperr.NotFound, "no identity named %q: list them with the `identities` query or `apelora identity list`", name)
		}
		if err := plan.Read(ctx, "identity "+name, cur.fact()); err != nil {
			return err
		}
		if err := revokeRefusal(cur, managers, by.Identity != nil, now); err != nil {
			return err
		}
		revoked, err = tx.SetRevoked(ctx, cur.ID, by.Name, now)
		if revoked == nil && err == nil {
			// A dry run's change writes nothing (plan.Writes): the identity is as it was.
			revoked = cur
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return revoked, nil
}

// fact is the identity as a plan that names it reads it: which identity (created when),
// what it may do, until when, and whether it is revoked already.
func (i *Identity) fact() string {
	perms := make([]string, len(i.Permissions))
	for j, p := range i.Permissions {
		perms[j] = string(p)
	}
	s := fmt.Sprintf("created %s, permissions %s", i.CreatedAt.UTC().Format(time.RFC3339Nano), strings.Join(perms, ", "))
	if i.ExpiresAt != nil {
		s += ", expires " + i.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	if i.SSO != nil {
		s += ", signs in through " + i.SSO.Issuer
	}
	if i.RevokedAt != nil {
		s += ", revoked " + i.RevokedAt.UTC().Format(time.RFC3339Nano)
	}
	return s
}

// revokeRefusal is why revoking cur is refused, given the identities that hold
// manage-infrastructure and are not revoked (others in the list are ignored), or nil.
// overAPI: the caller is an identity, not an administrator on the server.
func revokeRefusal(cur *Identity, managers []Identity, overAPI bool, now time.Time) error {
	if cur.RevokedAt != nil {
		return apperr.New(apperr.FailedPrecondition, "identity %q was already revoked at %s by %s", cur.Name, cur.RevokedAt.UTC().Format(time.RFC3339), cur.RevokedBy)
	}
	if overAPI && cur.Has(ManageInfrastructure) && cur.Active(now) && activeCount(managers, now) <= 1 {
		return apperr.New(apperr.FailedPrecondition, "identity %q is the last active one with manage-infrastructure: create another first (createIdentity), or revoke it on the server with `apelora identity revoke %s`", cur.Name, cur.Name)
	}
	return nil
}

// RevokeRefusal says why revoking id over the API would be refused now, in the words of
// the refusal Revoke would answer with, or "" when it would not. It reads the identities
// only when the answer depends on the others (id is an active manager).
func (s *Service) RevokeRefusal(ctx context.Context, id *Identity) (string, error) {
	var all []Identity
	if id.RevokedAt == nil && id.Has(ManageInfrastructure) {
		var err error
		if all, err = s.Store.Identities(ctx); err != nil {
			return "", err
		}
	}
	return s.RevokeRefusalAmong(id, all), nil
}

// RevokeRefusalAmong is RevokeRefusal for an identity of a list already read (all, every
// identity).
func (s *Service) RevokeRefusalAmong(id *Identity, all []Identity) string {
	if err := revokeRefusal(id, all, true, s.now()); err != nil {
		return apperr.PublicMessage(err)
	}
	return ""
}

func activeCount(ids []Identity, now time.Time) int {
	n := 0
	for i := range ids {
		if ids[i].Active(now) && ids[i].Has(ManageInfrastructure) {
			n++
		}
	}
	return n
}

// List returns every identity, revoked and expired ones included, oldest first.
func (s *Service) List(ctx context.Context) ([]Identity, error) {
	return s.Store.Identities(ctx)
}

// clusterGrants looks the clusters of grants up: a grant naming no registered cluster is
// left out (unknownIn names it).
func clusterGrants(ctx context.Context, tx Tx, in []GrantText) ([]ClusterGrant, error) {
	if len(in) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(in))
	for _, g := range in {
		names = append(names, g.Cluster)
	}
	ids, err := tx.ClusterIDs(ctx, names)
	if err != nil {
		return nil, err
	}
	var out []ClusterGrant
	for _, g := range in {
		if id, ok := ids[g.Cluster]; ok {
			out = append(out, ClusterGrant{Permission: g.Permission, Cluster: id, ClusterName: g.Cluster})
		}
	}
	return out, nil
}

// unknownIn lists the grants of in that found no cluster (absent from got).
func unknownIn(in []GrantText, got []ClusterGrant) []string {
	var out []string
	for _, g := range in {
		if !slices.ContainsFunc(got, func(c ClusterGrant) bool { return c.ClusterName == g.Cluster }) {
			out = append(out, g.String())
		}
	}
	return out
}
