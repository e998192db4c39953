package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/apperr"
)

// SSOAccount is who an identity is at the company's identity provider (OIDC): the
// issuer and subject it is keyed by, and its groups as the provider last named them (at a
// sign-in, or when Apelora asked again). An identity made by an administrator has none.
type SSOAccount struct {
	Issuer  string
	Subject string
	Groups  []string
	// ConfirmedAt is when the provider last named the groups; zero when it never did since
	// they were kept (before re-checks existed).
	ConfirmedAt time.Time
	// ConfirmedUntil is when that word lapses: ConfirmedAt and the re-check interval. Past
	// it the identity holds view-infrastructure alone (Identity.Granted) until the provider
	// names its groups again.
	ConfirmedUntil time.Time
}

// Confirmed reports whether the provider's word on the groups still holds at now.
func (a *SSOAccount) Confirmed(now time.Time) bool { return now.Before(a.ConfirmedUntil) }

// GroupPermissions maps the identity provider's group names to Apelora's permissions,
// each in every cluster or in one cluster only (permission@cluster). It is the only source
// of an SSO identity's permissions: a group not in it grants nothing.
type GroupPermissions map[string][]GrantText

// ParseGroupPermissions reads APELORA_OIDC_GROUP_PERMISSIONS:
// "group=permission,permission;group=permission@cluster", for example
// "apelora-admins=manage-infrastructure,hardware.delete;rack1-ops=manage-infrastructure@rack1;apelora-viewers=view-infrastructure".
// A cluster named here need not be registered yet: a grant in a cluster not registered
// grants nothing (skipped with a warning at each sign-in).
func ParseGroupPermissions(s string) (GroupPermissions, error) {
	m := GroupPermissions{}
	for entry := range strings.SplitSeq(s, ";") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		i := strings.LastIndex(entry, "=")
		group := strings.TrimSpace(entry[:max(i, 0)])
		if i < 0 || group == "" {
			return nil, fmt.Errorf("%q is not group=permission[,permission]: write for example apelora-admins=manage-infrastructure", entry)
		}
		grants := slices.Clone(m[group])
		for p := range strings.SplitSeq(entry[i+1:], ",") {
			g, err := ParseGrant(p)
			if err != nil {
				return nil, fmt.Errorf("group %q: %s", group, apperr.PublicMessage(err))
			}
			grants = append(grants, g)
		}
		unscoped, scoped := SplitGrants(grants)
		var perms []Permission
		var err error
		if len(unscoped) > 0 || len(scoped) == 0 {
			if perms, err = checkPermissions(unscoped); err != nil {
				return nil, fmt.Errorf("group %q: %s", group, apperr.PublicMessage(err))
			}
		}
		if scoped, err = checkGrants(perms, scoped); err != nil {
			return nil, fmt.Errorf("group %q: %s", group, apperr.PublicMessage(err))
		}
		m[group] = nil
		for _, p := range perms {
			m[group] = append(m[group], GrantText{Permission: p})
		}
		m[group] = append(m[group], scoped...)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("no group is mapped, so nobody could sign in: give at least one, such as apelora-admins=manage-infrastructure")
	}
	return m, nil
}

// String writes the mapping back in the form ParseGroupPermissions reads, groups sorted.
func (m GroupPermissions) String() string {
	groups := make([]string, 0, len(m))
	for g := range m {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	parts := make([]string, len(groups))
	for i, g := range groups {
		ps := make([]string, len(m[g]))
		for j, p := range m[g] {
			ps[j] = p.String()
		}
		parts[i] = g + "=" + strings.Join(ps, ",")
	}
	return strings.Join(parts, ";")
}

// Grant returns the permissions groups are mapped to in every cluster (their union), or a
// FORBIDDEN error naming the groups that would grant access when none of them is mapped:
// no group, no access. Their grants in one cluster are GrantIn's.
func (m GroupPermissions) Grant(groups []string) ([]Permission, error) {
	var perms []Permission
	scoped := m.GrantIn(groups)
	for _, g := range groups {
		for _, p := range m[g] {
			if p.Cluster == "" {
				perms = append(perms, p.Permission)
			}
		}
	}
	if len(perms) == 0 && len(scoped) == 0 {
		mapped := make([]string, 0, len(m))
		for g := range m {
			mapped = append(mapped, g)
		}
		slices.Sort(mapped)
		have := "you are in no group of the identity provider, so nothing grants you access to Apelora"
		if len(groups) > 0 {
			have = "your groups (" + strings.Join(truncateList(groups, 10), ", ") + ") grant no access to Apelora"
		}
		return nil, apperr.New(apperr.Forbidden, "%s: ask your identity provider's administrator to add you to one of the groups %s", have, strings.Join(mapped, ", "))
	}
	if len(perms) == 0 {
		return []Permission{}, nil
	}
	return checkPermissions(perms)
}

// GrantIn returns the grants in one cluster groups are mapped to (their union), sorted.
func (m GroupPermissions) GrantIn(groups []string) []GrantText {
	var out []GrantText
	for _, g := range groups {
		for _, p := range m[g] {
			if p.Cluster != "" {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b GrantText) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out)
}

// setGroupGrants sets an SSO identity's grants in one cluster to what its groups map to,
// in tx; a grant naming a cluster not registered is skipped, with one warning.
func (s *SSO) setGroupGrants(ctx context.Context, tx Tx, id *Identity, groups []string) error {
	want := s.Groups.GrantIn(groups)
	grants, err := clusterGrants(ctx, tx, want)
	if err != nil {
		return err
	}
	if unknown := unknownIn(want, grants); len(unknown) > 0 {
		s.log().WarnContext(ctx, "an SSO user's groups grant permissions in clusters that are not registered: those grants are skipped until they are",
			"identity", id.Name, "skipped", unknown)
	}
	if len(grants) == 0 && len(id.Grants) == 0 {
		return nil
	}
	return tx.SetClusterGrants(ctx, id.ID, grants)
}

func truncateList(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("and %d more", len(s)-n))
}

// SSOClaims is what a verified ID token says about who signed in.
type SSOClaims struct {
	Issuer  string
	Subject string
	// Username is the name the provider prefers (preferred_username, else email); the
	// identity's name is made from it.
	Username string
	Groups   []string
}

// SSOProvider is the company's identity provider, spoken to with the authorization code
// flow. Its errors are *apperr.Error: UNAUTHENTICATED for a refused code or token (what
// was wrong with it), UNAVAILABLE when the provider does not answer.
type SSOProvider interface {
	// AuthCodeURL is where the browser goes to sign in, carrying state, nonce and the PKCE
	// challenge of verifier.
	AuthCodeURL(ctx context.Context, state, nonce, verifier string) (string, error)
	// Exchange redeems code (with verifier) and returns the ID token's claims, verified:
	// issuer, audience, expiry, signature and nonce; and the refresh token, zero when the
	// provider gave none.
	Exchange(ctx context.Context, code, verifier, nonce string) (*SSOClaims, ProviderToken, error)
	// DeviceAuth starts the device authorization grant (RFC 8628), for `apeloractl login`;
	// FAILED_PRECONDITION when the provider offers none.
	DeviceAuth(ctx context.Context) (*DeviceSignIn, error)
	// DeviceToken waits until ctx ends for the user to approve the device sign-in, then
	// returns the ID token's claims, verified, and the refresh token (zero: none); pending
	// when ctx ended first.
	DeviceToken(ctx context.Context, deviceCode string, interval time.Duration) (c *SSOClaims, refresh ProviderToken, pending bool, err error)
	// Refresh asks the provider about a signed-in user again with its refresh token: the
	// user's claims as the provider states them now (a new ID token, verified, or its
	// userinfo), and the refresh token to use next time (zero: the same one).
	// UNAUTHENTICATED when the provider refuses the token (the grant was revoked, the user
	// disabled, the token expired): that is its answer; UNAVAILABLE when it cannot be asked.
	Refresh(ctx context.Context, t ProviderToken) (c *SSOClaims, next ProviderToken, err error)
}

// DeviceSignIn is a device authorization in progress: the user opens VerificationURI and
// enters UserCode; the command line holds DeviceCode and asks again every Interval.
type DeviceSignIn struct {
	DeviceCode              string
	UserCode                string
	VerificationURI         string
	VerificationURIComplete string
	Expiry                  time.Time
	Interval                time.Duration
}

// SSOStore keeps sign-ins in progress, SSO identities and their console sessions.
type SSOStore interface {
	Credentials
	Directory
	// BeginSSOSignIn keeps a sign-in in progress for ttl.
	BeginSSOSignIn(ctx context.Context, stateHash []byte, nonce, verifier string, ttl time.Duration) error
	// TakeSSOSignIn deletes the sign-in whose state hashes to stateHash and returns its
	// nonce and verifier; ok is false when there is none (used already, expired or never
	// started).
	TakeSSOSignIn(ctx context.Context, stateHash []byte) (nonce, verifier string, ok bool, err error)

	// KeepSSOGrant keeps the sealed refresh token of a console session (sealed with the
	// key keyID names), to be asked again after checkIn.
	KeepSSOGrant(ctx context.Context, consoleSession int64, keyID, sealed []byte, checkIn time.Duration) error
	// ClaimSSOGrants returns up to limit grants sealed with keyID that are due, each with
	// its identity, claimed for hold (no other replica takes them meanwhile); grants of
	// sessions that expired, or of identities that may no longer authenticate, are dropped.
	ClaimSSOGrants(ctx context.Context, keyID []byte, hold time.Duration, limit int) ([]SSOGrant, error)
	// ConfirmSSOGrant releases a claimed grant, due again after checkIn, with the refresh
	// token to use next (sealed; nil: the same one).
	ConfirmSSOGrant(ctx context.Context, consoleSession int64, sealed []byte, checkIn time.Duration) error
	// ConfirmSSOGroups records that the provider named the identity's groups as they are
	// kept (and so its permissions), valid for confirmedFor; false when they are not the
	// ones kept (nothing is written then).
	ConfirmSSOGroups(ctx context.Context, identityID int64, groups []string, perms []Permission, confirmedFor time.Duration) (bool, error)
}

// SSOGrant is a session's refresh token, sealed, and its identity as it was claimed.
type SSOGrant struct {
	ConsoleSession int64
	Sealed         []byte
	Identity       Identity
}

// SSOSignInTTL is how long a sign-in may take at the provider.
const SSOSignInTTL = 10 * time.Minute

// DefaultSSORecheckInterval is how long the provider's word on a user's groups holds
// (APELORA_OIDC_RECHECK_INTERVAL): each session's groups are asked for again once half of
// it has passed, so a demotion at the provider takes effect within half of it (and the
// provider's answer), and a provider that cannot be asked leaves the last known groups for
// at most all of it, then view-only. Five minutes: a demoted administrator keeps her
// permissions for at most about two and a half minutes; each SSO session costs the
// provider one refresh every two and a half minutes; an outage of the provider shorter
// than a few minutes goes unnoticed.
const DefaultSSORecheckInterval = 5 * time.Minute

// SSO signs administrators in through the identity provider. A nil *SSO is "not configured".
type SSO struct {
	Provider SSOProvider
	Store    SSOStore
	Groups   GroupPermissions
	// Issuer is the configured issuer, named in messages.
	Issuer string
	// Recheck is how long the provider's word on a user's groups holds; zero means
	// DefaultSSORecheckInterval.
	Recheck time.Duration
	// Tokens seals the provider's refresh tokens kept with their sessions; nil keeps none
	// (the sessions then hold their groups for Recheck, then view-only).
	Tokens TokenSealer
	// Log says what the re-checks find (never a token); nil: nothing.
	Log *slog.Logger
}

func (s *SSO) recheck() time.Duration {
	if s.Recheck > 0 {
		return s.Recheck
	}
	return DefaultSSORecheckInterval
}

func (s *SSO) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

func randomValue() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate sign-in values: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Begin starts a sign-in: it returns where to send the browser and the state the browser
// must keep (in a cookie) and bring back.
func (s *SSO) Begin(ctx context.Context) (authURL, state string, err error) {
	var nonce, verifier string
	if state, err = randomValue(); err == nil {
		if nonce, err = randomValue(); err == nil {
			verifier, err = randomValue() // 43 characters: RFC 7636's shortest verifier
		}
	}
	if err != nil {
		return "", "", err
	}
	// Ask the provider first: when it is down nothing is kept.
	if authURL, err = s.Provider.AuthCodeURL(ctx, state, nonce, verifier); err != nil {
		return "", "", err
	}
	if err := s.Store.BeginSSOSignIn(ctx, HashToken(state), nonce, verifier, SSOSignInTTL); err != nil {
		return "", "", err
	}
	return authURL, state, nil
}

// ActionSignIn names the audit event of a successful SSO sign-in (its actor the identity,
// its details the subject, issuer and groups).
const ActionSignIn = "signIn"

// Finish completes a sign-in at the callback: state is what the provider sent back,
// browserState what the browser kept since Begin, code the authorization code. It returns
// the identity (made or updated from the token's claims, in an audited change under the
// audit.Action in ctx), its new console session and the session's value for the cookie.
// Every refusal is an *apperr.Error that says what was wrong and what to do.
func (s *SSO) Finish(ctx context.Context, state, browserState, code string, ttl time.Duration) (*Identity, *ConsoleSession, string, error) {
	if state == "" || browserState == "" || state != browserState {
		return nil, nil, "", apperr.New(apperr.Unauthenticated, "the sign-in's state does not match the one this browser started with (state mismatch): start again with Sign in with SSO from the console")
	}
	if len(code) == 0 || len(code) > 2048 || len(state) > 200 {
		return nil, nil, "", apperr.New(apperr.Unauthenticated, "the identity provider sent back no usable authorization code: start again with Sign in with SSO")
	}
	nonce, verifier, ok, err := s.Store.TakeSSOSignIn(ctx, HashToken(state))
	if err != nil {
		return nil, nil, "", err
	}
	if !ok {
		return nil, nil, "", apperr.New(apperr.Unauthenticated, "this sign-in was already completed or took longer than %s (a replayed callback): start again with Sign in with SSO", SSOSignInTTL)
	}
	claims, refresh, err := s.Provider.Exchange(ctx, code, verifier, nonce)
	if err != nil {
		return nil, nil, "", err
	}
	return s.signIn(ctx, claims, refresh, ttl)
}

// BeginDevice starts a command line's sign-in (`apeloractl login`).
func (s *SSO) BeginDevice(ctx context.Context) (*DeviceSignIn, error) {
	return s.Provider.DeviceAuth(ctx)
}

// FinishDevice waits (until ctx ends) for the user to approve the device sign-in, then signs
// in as Finish does; pending when the user has not approved it yet. The session value is
// the command line's token.
func (s *SSO) FinishDevice(ctx context.Context, deviceCode string, interval, ttl time.Duration) (*Identity, *ConsoleSession, string, bool, error) {
	if deviceCode == "" || len(deviceCode) > 2048 {
		return nil, nil, "", false, apperr.Invalid("deviceCode", "give the device code `apeloractl login` was answered")
	}
	claims, refresh, pending, err := s.Provider.DeviceToken(ctx, deviceCode, interval)
	if err != nil || pending {
		return nil, nil, "", pending, err
	}
	id, sess, value, err := s.signIn(context.WithoutCancel(ctx), claims, refresh, ttl)
	return id, sess, value, false, err
}

// signIn makes or updates the identity of verified claims (its groups confirmed for the
// re-check interval), starts its session and keeps the provider's refresh token with it,
// sealed, so the groups can be asked for again.
func (s *SSO) signIn(ctx context.Context, claims *SSOClaims, refresh ProviderToken, ttl time.Duration) (*Identity, *ConsoleSession, string, error) {
	perms, err := s.Groups.Grant(claims.Groups)
	if err != nil {
		return nil, nil, "", err
	}
	if a := audit.ActionFrom(ctx); a != nil {
		a.Detail("subject", claims.Subject)
		a.Detail("issuer", claims.Issuer)
		a.Detail("groups", claims.Groups)
	}
	var id *Identity
	err = s.Store.ChangeIdentities(ctx, func(tx Tx) error {
		var err error
		if id, err = tx.SignInSSO(ctx, SSOName(claims), *claims, perms, s.recheck()); err != nil {
			return err
		}
		if id.RevokedAt == nil {
			if err := s.setGroupGrants(ctx, tx, id, claims.Groups); err != nil {
				return err
			}
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Actor = id.Name
		}
		// A revoked SSO identity stays revoked: signing in again does not undo it.
		return id.Usable(time.Now())
	})
	if err != nil {
		return nil, nil, "", err
	}
	sess, value, err := newConsoleSession(ctx, s.Store, id, ttl)
	if err != nil {
		return nil, nil, "", err
	}
	if err := s.keepGrant(ctx, id, sess, refresh); err != nil {
		return nil, nil, "", err
	}
	return id, sess, value, nil
}

// keepGrant keeps the session's refresh token, sealed, to ask the provider again at half
// the re-check interval. Without one (the provider gave none, or no sealer) the session's
// groups hold for the interval, then it is view-only: said in the log, once per sign-in.
func (s *SSO) keepGrant(ctx context.Context, id *Identity, sess *ConsoleSession, refresh ProviderToken) error {
	why := ""
	switch {
	case refresh.IsZero():
		why = "the identity provider gave no refresh token (ask for the offline_access scope in APELORA_OIDC_SCOPES, or allow refresh tokens for the client)"
	case s.Tokens == nil:
		why = "this server keeps no refresh tokens"
	}
	if why != "" {
		s.log().WarnContext(ctx, "an SSO session cannot be checked with the identity provider again: "+why+"; it has view-only access once its groups lapse, until its user signs in again",
			"identity", id.Name, "session", sess.ID, "lapses_in", s.recheck().String())
		return nil
	}
	sealed, err := s.Tokens.Seal(refresh, sess.ID)
	if err != nil {
		return fmt.Errorf("seal the identity provider's refresh token: %w", err)
	}
	return s.Store.KeepSSOGrant(ctx, sess.ID, s.Tokens.KeyID(), sealed, s.recheck()/2)
}

var notNameChars = regexp.MustCompile(`[^a-z0-9._-]+`)

// SSOName is the identity name an SSO user is first given: the provider's username made
// to fit ValidateName, or "sso-" and a hash of the subject when nothing of it fits. The
// store adds a hash of the subject when the name is taken by another identity.
func SSOName(c *SSOClaims) string {
	n := strings.ToLower(c.Username)
	if at := strings.IndexByte(n, '@'); at > 0 {
		n = n[:at]
	}
	n = strings.Trim(notNameChars.ReplaceAllString(n, "-"), "-._")
	for n != "" && (n[0] < 'a' || n[0] > 'z') {
		n = n[1:]
	}
	if len(n) > 50 {
		n = n[:50]
	}
	if ValidateName(n) != nil {
		return "sso-" + SubjectTag(c)
	}
	return n
}

// SubjectTag is a short, stable tag of an SSO subject, to tell apart two users whose
// usernames make the same name.
func SubjectTag(c *SSOClaims) string {
	h := sha256.Sum256([]byte(c.Issuer + "\x00" + c.Subject))
	return hex.EncodeToString(h[:4])
}
