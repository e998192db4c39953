package identity

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/internal/apperr"
)

func TestUsable(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	cases := []struct {
		id   Identity
		says string // "" = usable
	}{
		{Identity{Name: "a"}, ""},
		{Identity{Name: "a", ExpiresAt: &later}, ""},
		{Identity{Name: "a", ExpiresAt: &now}, `identity "a" expired at 2026-03-01T12:00:00Z`},
		{Identity{Name: "a", ExpiresAt: &earlier}, "expired"},
		{Identity{Name: "a", RevokedAt: &earlier, RevokedBy: "b", ExpiresAt: &later}, `identity "a" was revoked`},
	}
	for _, c := range cases {
		err := c.id.Usable(now)
		switch {
		case c.says == "" && err != nil:
			t.Errorf("%+v: %v", c.id, err)
		case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says) || apperr.CodeOf(err) != apperr.Unauthenticated):
			t.Errorf("%+v: %v, want UNAUTHENTICATED saying %q", c.id, err, c.says)
		}
		if c.id.Active(now) != (c.says == "") {
			t.Errorf("%+v: Active disagrees with Usable", c.id)
		}
	}
}

func TestPermissionSetsThatGrantNothingAreRefused(t *testing.T) {
	cases := []struct {
		perms []Permission
		field string // "" = accepted
		says  string
	}{
		{[]Permission{ManageInfrastructure, HardwareDelete}, "", ""},
		{[]Permission{ViewInfrastructure, ViewInfrastructure}, "", ""},
		{nil, "permissions", "at least one permission"},
		{[]Permission{HardwareDelete}, "permissions", "could do nothing"},
		{[]Permission{ViewInfrastructure, HardwareDelete}, "permissions", "could do nothing"},
		{[]Permission{"root"}, "permissions", `unknown permission "root"`},
		{[]Permission{Permission(strings.Repeat("x", 1<<20))}, "permissions", "bytes)"},
	}
	for _, c := range cases {
		got, err := checkPermissions(c.perms)
		if c.field == "" {
			if err != nil || len(got) == 0 {
				t.Errorf("%v refused: %v", c.perms, err)
			}
			continue
		}
		e, ok := apperr.As(err)
		if !ok || e.Code != apperr.InvalidInput || e.Field != c.field || !strings.Contains(e.Message, c.says) || len(e.Message) > 400 {
			t.Errorf("%.40v: %v, want INVALID_INPUT on %s saying %q (and short)", c.perms, err, c.field, c.says)
		}
	}
	if got, _ := checkPermissions([]Permission{ViewInfrastructure, ManageInfrastructure, ViewInfrastructure}); len(got) != 2 {
		t.Errorf("repeats kept: %v", got)
	}
}

func TestExpiry(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	cases := []struct {
		in    NewIdentity
		want  time.Time // zero: never
		field string    // refused on this field
	}{
		{NewIdentity{}, time.Time{}, ""},
		{NewIdentity{ExpiresIn: "30d"}, now.Add(30 * 24 * time.Hour), ""},
		{NewIdentity{ExpiresIn: "90m"}, now.Add(90 * time.Minute), ""},
		{NewIdentity{ExpiresAt: &future}, future, ""},
		{NewIdentity{ExpiresAt: &now}, time.Time{}, "expiresAt"},
		{NewIdentity{ExpiresAt: &past}, time.Time{}, "expiresAt"},
		{NewIdentity{ExpiresAt: &future, ExpiresIn: "1h"}, time.Time{}, "expiresIn"},
		{NewIdentity{ExpiresIn: "-1h"}, time.Time{}, "expiresIn"},
		{NewIdentity{ExpiresIn: "0d"}, time.Time{}, "expiresIn"},
		{NewIdentity{ExpiresIn: "soon"}, time.Time{}, "expiresIn"},
		{NewIdentity{ExpiresIn: "99999999999d"}, time.Time{}, "expiresIn"},
		{NewIdentity{ExpiresIn: "1y"}, time.Time{}, "expiresIn"},
		{NewIdentity{ExpiresIn: strings.Repeat("9", 1<<20) + "h"}, time.Time{}, "expiresIn"},
	}
	for _, c := range cases {
		got, err := expiry(c.in, now)
		if c.field != "" {
			if e, ok := apperr.As(err); !ok || e.Code != apperr.InvalidInput || e.Field != c.field || len(e.Message) > 300 {
				t.Errorf("%.60v: %v, want INVALID_INPUT on %s", c.in, err, c.field)
			}
			continue
		}
		if err != nil || (got == nil) != c.want.IsZero() || (got != nil && !got.Equal(c.want)) {
			t.Errorf("%+v: %v %v, want %v", c.in, got, err, c.want)
		}
	}
}

func TestExpiryFromFlag(t *testing.T) {
	if at, in := ExpiryFromFlag("2030-01-02T03:04:05Z"); at == nil || in != "" || at.Year() != 2030 {
		t.Errorf("RFC 3339: %v %q", at, in)
	}
	if at, in := ExpiryFromFlag("30d"); at != nil || in != "30d" {
		t.Errorf("duration: %v %q", at, in)
	}
}

// fakeIdentities is an in-memory identity table for the sessions watch.
type fakeIdentities struct {
	mu   sync.Mutex
	rows map[int64]*Identity
	fail error
}

func (f *fakeIdentities) IdentityByID(ctx context.Context, id int64) (*Identity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	if r, ok := f.rows[id]; ok {
		c := *r
		return &c, nil
	}
	return nil, nil
}

func (f *fakeIdentities) ConsoleSessionByID(ctx context.Context, id int64) (*ConsoleSession, error) {
	return nil, nil
}

func (f *fakeIdentities) set(id int64, fn func(*Identity)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fn == nil {
		delete(f.rows, id)
		return
	}
	fn(f.rows[id])
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var viewer = []Permission{ViewInfrastructure}

// ended waits for ctx to end and returns its cause, failing when it does not within d.
func ended(t *testing.T, ctx context.Context, d time.Duration) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		t.Fatalf("the session did not end within %v", d)
		return nil
	}
}

func TestSessionsEndWhenTheIdentityIsRevokedDeletedOrExpires(t *testing.T) {
	store := &fakeIdentities{rows: map[int64]*Identity{
		1: {ID: 1, Name: "alice", Permissions: viewer}, 2: {ID: 2, Name: "bob", Permissions: viewer}, 3: {ID: 3, Name: "carol", Permissions: viewer},
	}}
	s := NewSocketRegistry(store, quiet)
	watch := func(id int64) context.Context {
		ctx, err := s.Watch(t.Context(), &Identity{ID: id, Name: store.rows[id].Name})
		if err != nil {
			t.Fatal(err)
		}
		return ctx
	}
	alice1, alice2, bob, carol := watch(1), watch(1), watch(2), watch(3)
	if s.Open() != 4 {
		t.Fatalf("%d sessions watched, want 4", s.Open())
	}

	// A change that leaves bob usable ends nothing; revoking alice ends both of hers.
	s.Changed(t.Context(), 2)
	now := time.Now()
	store.set(1, func(i *Identity) { i.RevokedAt, i.RevokedBy = &now, "bob" })
	s.Changed(t.Context(), 1)
	for _, ctx := range []context.Context{alice1, alice2} {
		cause := ended(t, ctx, time.Second)
		if e, ok := apperr.As(cause); !ok || e.Code != apperr.Unauthenticated || !strings.Contains(e.Message, `"alice" was revoked`) {
			t.Fatalf("cause = %v", cause)
		}
	}
	if bob.Err() != nil || carol.Err() != nil {
		t.Fatal("other identities' sessions ended")
	}

	// A database that cannot answer keeps the sessions (nothing says they must end).
	store.fail = errors.New("connection refused")
	s.Changed(t.Context(), 2)
	if bob.Err() != nil {
		t.Fatal("a failed read ended a session")
	}
	store.fail = nil

	// Deleted (by SQL): found by CheckAll, as after a lost notification.
	store.set(2, nil)
	s.CheckAll(t.Context())
	if cause := ended(t, bob, time.Second); !strings.Contains(cause.Error(), `"bob" no longer exists`) {
		t.Fatalf("cause = %v", cause)
	}

	// An expiry set while connected is scheduled; at it, the session ends.
	soon := time.Now().Add(150 * time.Millisecond)
	store.set(3, func(i *Identity) { i.ExpiresAt = &soon })
	s.Changed(t.Context(), 3)
	if cause := ended(t, carol, 5*time.Second); !strings.Contains(cause.Error(), `"carol" expired`) {
		t.Fatalf("cause = %v", cause)
	}

	// Ended sessions are forgotten.
	deadline := time.Now().Add(time.Second)
	for s.Open() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.Open(); n != 0 {
		t.Fatalf("%d sessions still watched", n)
	}
}

func TestWatchRefusesAnIdentityRevokedSinceItAuthenticated(t *testing.T) {
	now := time.Now()
	store := &fakeIdentities{rows: map[int64]*Identity{1: {ID: 1, Name: "alice", RevokedAt: &now, RevokedBy: "bob"}}}
	s := NewSocketRegistry(store, quiet)
	// The caller authenticated a moment before the revocation committed.
	if _, err := s.Watch(t.Context(), &Identity{ID: 1, Name: "alice"}); apperr.CodeOf(err) != apperr.Unauthenticated {
		t.Fatalf("Watch = %v, want UNAUTHENTICATED", err)
	}
	past := now.Add(-time.Second)
	store.rows[1] = &Identity{ID: 1, Name: "alice", ExpiresAt: &past}
	if _, err := s.Watch(t.Context(), &Identity{ID: 1, Name: "alice"}); apperr.CodeOf(err) != apperr.Unauthenticated {
		t.Fatalf("Watch of an expired identity = %v", err)
	}
	deadline := time.Now().Add(time.Second)
	for s.Open() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Open() != 0 {
		t.Fatal("refused sessions are still watched")
	}
}

// An SSO identity holds its groups' permissions while the provider's word on them holds;
// past it, view-infrastructure alone, and a refusal that says why.
func TestSSOGroupsHoldUntilTheirConfirmationLapses(t *testing.T) {
	now := time.Now()
	admin := []Permission{HardwareDelete, ManageInfrastructure}
	id := &Identity{Name: "alice", Permissions: admin, SSO: &SSOAccount{Subject: "s", ConfirmedAt: now, ConfirmedUntil: now.Add(time.Minute)}}
	if got := id.Granted(now.Add(59 * time.Second)); !slices.Equal(got, admin) {
		t.Fatalf("within the interval: %v", got)
	}
	if got := id.Granted(now.Add(time.Minute)); !slices.Equal(got, []Permission{ViewInfrastructure}) {
		t.Fatalf("at its end: %v", got)
	}
	id.SSO.ConfirmedUntil = now.Add(-time.Second)
	if !id.Has(ViewInfrastructure) || id.Has(ManageInfrastructure) || id.Has(HardwareDelete) {
		t.Fatal("a lapsed SSO identity holds more than view-infrastructure")
	}
	err := id.Require(ManageInfrastructure)
	if apperr.CodeOf(err) != apperr.Forbidden || !strings.Contains(err.Error(), "has not confirmed those groups since") || !strings.Contains(err.Error(), "view-only") {
		t.Fatalf("the refusal: %v", err)
	}
	// Groups that granted nothing grant nothing lapsed either; bearer identities never lapse.
	if got := (&Identity{SSO: &SSOAccount{}}).Granted(now); len(got) != 0 {
		t.Fatalf("no groups: %v", got)
	}
	if got := (&Identity{Permissions: admin}).Granted(now.Add(24 * time.Hour)); !slices.Equal(got, admin) {
		t.Fatalf("a bearer identity: %v", got)
	}
}

// A watched socket's identity is replaced when it changes: demoted, the socket's next
// operation is authorised as the identity is now, and the socket stays open; left
// without view-infrastructure, the socket ends.
func TestWatchedSocketsAreReauthorised(t *testing.T) {
	store := &fakeIdentities{rows: map[int64]*Identity{1: {ID: 1, Name: "alice", Permissions: []Permission{ManageInfrastructure}}}}
	s := NewSocketRegistry(store, quiet)
	ctx, err := s.Watch(t.Context(), &Identity{ID: 1, Name: "alice", Permissions: []Permission{ManageInfrastructure}})
	if err != nil {
		t.Fatal(err)
	}
	if !FromContext(ctx).Has(ManageInfrastructure) {
		t.Fatal("the socket's identity is not the one watched")
	}
	store.set(1, func(i *Identity) { i.Permissions = viewer })
	s.Changed(t.Context(), 1)
	if id := FromContext(ctx); id.Has(ManageInfrastructure) || !id.Has(ViewInfrastructure) || ctx.Err() != nil {
		t.Fatalf("after a demotion: %+v, ended %v", id, ctx.Err())
	}
	store.set(1, func(i *Identity) { i.Permissions = nil })
	s.Changed(t.Context(), 1)
	if cause := ended(t, ctx, time.Second); apperr.CodeOf(cause) != apperr.Forbidden {
		t.Fatalf("without view-infrastructure: %v", cause)
	}

	// Scoped to reading one cluster (view-infrastructure@rack1), a socket that read every
	// cluster ends: its subscriptions were started under the wider scope.
	store.set(1, func(i *Identity) { i.Permissions = viewer })
	wide, err := s.Watch(t.Context(), &Identity{ID: 1, Name: "alice", Permissions: viewer})
	if err != nil {
		t.Fatal(err)
	}
	store.set(1, func(i *Identity) {
		i.Permissions = nil
		i.Grants = []ClusterGrant{{Permission: ViewInfrastructure, Cluster: 1, ClusterName: "rack1"}}
	})
	s.Changed(t.Context(), 1)
	if cause := ended(t, wide, time.Second); apperr.CodeOf(cause) != apperr.Forbidden || !strings.Contains(cause.Error(), "reads fewer clusters") {
		t.Fatalf("read scope narrowed: %v", cause)
	}
	// A socket opened as the reader of rack1 stays open when it reads every cluster again.
	scoped, err := s.Watch(t.Context(), &Identity{ID: 1, Name: "alice", Grants: []ClusterGrant{{Permission: ViewInfrastructure, Cluster: 1, ClusterName: "rack1"}}})
	if err != nil {
		t.Fatal(err)
	}
	store.set(1, func(i *Identity) { i.Permissions, i.Grants = viewer, nil })
	s.Changed(t.Context(), 1)
	if !FromContext(scoped).ReadScope().All() || scoped.Err() != nil {
		t.Fatalf("widened: %+v, ended %v", FromContext(scoped), scoped.Err())
	}
}
