// Package enrolment is how a registered machine becomes an Incus member: the approval
// that has Incus issue a single-use join token, the member configuration the new server
// joins with, revoking a token, and removing a member.
//
// The join token is handed to the administrator once. It is never stored, logged, audited
// or put in an error: only its name and expiry are.
package enrolment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/domain/quorum"
	"github.com/apelora/fabric/internal/apperr"
)

// Secret is a join token that reveals itself only when asked.
type Secret interface {
	Reveal() string
}

// IssuedToken is a join token Incus has just issued.
type IssuedToken struct {
	Name      string
	ExpiresAt time.Time
	// Addresses are the members the joiner will contact (host:port).
	Addresses []string
	Token     Secret
	// Planned: a dry run's answer, no token was issued (Token is a placeholder that no
	// cluster accepts).
	Planned bool
}

// ConfigKey is a member-specific key of a storage pool or network that a joining member
// supplies, with the value an existing member uses (Reference).
type ConfigKey struct {
	Entity      string // "storage-pool" or "network"
	Name        string
	Key         string
	Description string
	Reference   string
}

// ConfigValue is one member config entry the new server joins with.
type ConfigValue struct {
	Entity, Name, Key, Value string
}

// ID names the entry as enrol-member.sh takes it: ENTITY/NAME/KEY.
func (v ConfigValue) ID() string { return v.Entity + "/" + v.Name + "/" + v.Key }

// Incus is what enrolment asks of Incus.
type Incus interface {
	Snapshot(ctx context.Context) (*membership.Snapshot, error)
	IssueJoinToken(ctx context.Context, name string) (IssuedToken, error)
	RevokeJoinToken(ctx context.Context, name string) error
	MemberConfigKeys(ctx context.Context) ([]ConfigKey, error)
	// RemoveMember removes the member; when it is the member Apelora talks through, the
	// request goes through another one, and so do the calls after it.
	RemoveMember(ctx context.Context, name string, force bool) error
	// Through is the URL of the member Apelora talks to Incus through ("" over the unix
	// socket) and the configured URLs (APELORA_INCUS_URL's list) it starts from.
	Through() (through string, configured []string)
	// InstancesOn names the instances on a member, of every project ("project/name"
	// outside the default project), in a constant number of calls.
	InstancesOn(ctx context.Context, member string) ([]string, error)
}

// Store is what enrolment needs from the database.
type Store interface {
	Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error
	Record(ctx context.Context, name string) (*machines.Record, error)
	// EndAdmission ends the machine's open admission record, if any, in the change in
	// progress: the member it admitted is gone (removed, or a new join begins).
	EndAdmission(ctx context.Context, machine string) error
	// SetRecordCluster has the machine's record name the cluster it is enrolled in, in the
	// change in progress.
	SetRecordCluster(ctx context.Context, machine string, cluster int64) error
}

// Service performs the enrolment steps.
type Service struct {
	// Ports finds a cluster's Incus ports (the connection pool); Clusters lists the
	// registered clusters, among which clusters.OfRecord names each call's. Either nil:
	// Incus is not configured.
	Ports    clusters.Ports[Incus]
	Clusters clusters.Lister
	Store    Store
	Now      func() time.Time
	// Log hears of tokens that could not be withdrawn (names only); nil discards.
	Log *slog.Logger
}

// Approval is an approved enrolment: the join token (to hand over once) and the member
// configuration to join with.
type Approval struct {
	Name         string
	Token        Secret
	Planned      bool // no token was issued (a dry run): Token is a placeholder, never shown
	ExpiresAt    time.Time
	Addresses    []string
	MemberConfig []ConfigValue
	// Cluster is the cluster the token comes from, which the machine joins; MovedFrom is the
	// cluster its record named before, when the step moves it (nil otherwise).
	Cluster   clusters.Cluster
	MovedFrom *clusters.Cluster
	// record is the cluster the machine's record names before the step (nil: none).
	record *int64
}

// hostSpecificKeys are member-specific keys whose value on one host says nothing about
// another (a path or device, an address): the new member gets the driver's default unless
// the administrator gives a value. Every other key copies what an existing member uses.
var hostSpecificKeys = []string{"source", "source.wipe", "bgp.ipv4.nexthop", "bgp.ipv6.nexthop"}

// MemberConfig computes the member configuration for a new member from the keys the
// cluster lists, applying the administrator's overrides, each of which must name a key
// the cluster lists.
func MemberConfig(keys []ConfigKey, overrides []ConfigValue) ([]ConfigValue, error) {
	out := make([]ConfigValue, 0, len(keys))
	for _, k := range keys {
		v := k.Reference
		if slices.Contains(hostSpecificKeys, k.Key) || strings.HasPrefix(k.Key, "volatile.") {
			v = ""
		}
		out = append(out, ConfigValue{Entity: k.Entity, Name: k.Name, Key: k.Key, Value: v})
	}
	seen := map[string]bool{}
	for n, o := range overrides {
		// Each refusal names the entry's position, so a client shows it beside its row.
		bad := func(format string, args ...any) error {
			e := apperr.Invalid("memberConfig", format, args...)
			e.Details = map[string]any{"index": n}
			return e
		}
		if seen[o.ID()] {
			return nil, bad("member config %s is given twice", apperr.Quote(o.ID()))
		}
		seen[o.ID()] = true
		if strings.ContainsAny(o.Value, "\n\r\x00") {
			return nil, bad("member config %s: the value contains a line break or NUL", apperr.Quote(o.ID()))
		}
		i := slices.IndexFunc(out, func(v ConfigValue) bool { return v.ID() == o.ID() })
		if i < 0 {
			known := make([]string, len(out))
			for j, v := range out {
				known[j] = v.ID()
			}
			return nil, bad("the cluster has no member-specific key %s; it lists: %s", apperr.Quote(o.ID()), orNone(known))
		}
		out[i].Value = o.Value
	}
	return out, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// Approve has Incus issue a join token for the registered machine name, in the cluster
// named cluster ("" for the record's, or the environment's for a record that names none);
// the record names that cluster afterwards. Naming another cluster than the record's moves
// the machine there, only while it is REGISTERED in the cluster it leaves (no member, no
// pending join token).
func (s *Service) Approve(ctx context.Context, name, cluster string, overrides []ConfigValue) (*Approval, error) {
	if _, err := machines.Registered(ctx, s.Store, name, "register the machine before approving its enrolment"); err != nil {
		return nil, err
	}
	var approval *Approval
	err := s.Store.Audited(ctx, name, func(ctx context.Context) error {
		// Read again under the machine's lock: it may have been unregistered meanwhile.
		rec, err := machines.Registered(ctx, s.Store, name, "it was unregistered meanwhile")
		if err != nil {
			return err
		}
		if approval, err = s.Prepare(ctx, rec, cluster, overrides); err != nil {
			return err
		}
		// A new join begins: whatever admission the name had was of a member that is gone
		// (removed outside Apelora), and the new member is admitted afresh; the record names
		// the cluster it joins. Written after Incus issued the token (a change's database
		// writes follow its upstream calls).
		if err := s.Joining(ctx, approval); err != nil {
			// The database failed after Incus issued the token (nothing can be sent now:
			// the change wrote first); nobody holds the token, but it is pending.
			return apperr.Wrap(err, apperr.CodeOf(err), "%s; a join token for %s was issued and is pending: revoke it (revokeJoinToken) before approving again", apperr.PublicMessage(err), apperr.Quote(name))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return approval, nil
}

// Joining records, in the change in progress and after its upstream calls, what an issued
// join token means for the database: the machine's open admission ends (a new join
// begins), and its record names the cluster the token is from.
func (s *Service) Joining(ctx context.Context, a *Approval) error {
	if err := s.Store.EndAdmission(ctx, a.Name); err != nil {
		return err
	}
	if a.record != nil && *a.record == a.Cluster.ID {
		return nil
	}
	return s.Store.SetRecordCluster(ctx, a.Name, a.Cluster.ID)
}

// Joined is Joining for a step whose outcome its process did not record (the reconciler):
// the machine's cluster is the one the step named (given, "" for the record's).
func (s *Service) Joined(ctx context.Context, name, given string) error {
	rec, err := s.Store.Record(ctx, name)
	if err != nil {
		return err
	}
	var record *int64
	if rec != nil {
		record = rec.Cluster
	}
	if s.Clusters == nil {
		return apperr.NotConfigured(apperr.Incus)
	}
	cl, err := clusters.OfRecord(s.Clusters.All(), name, record, given)
	var moved *clusters.MovedError
	if err != nil && !errors.As(err, &moved) {
		return err
	}
	return s.Joining(ctx, &Approval{Name: name, Cluster: cl, record: record})
}

// in names the cluster of a call about machine (clusters.OfRecord: rec's cluster, the
// given one, the environment's) and returns its ports. A *clusters.MovedError comes back
// with the cluster named and its ports when move is true (the steps that may move a
// machine), as the error otherwise.
func (s *Service) in(ctx context.Context, name string, rec *machines.Record, given string, move bool) (clusters.Cluster, Incus, *clusters.MovedError, error) {
	if s.Ports == nil || s.Clusters == nil {
		return clusters.Cluster{}, nil, nil, apperr.NotConfigured(apperr.Incus)
	}
	var record *int64
	if rec != nil {
		record = rec.Cluster
	}
	cl, err := clusters.OfRecord(s.Clusters.All(), name, record, given)
	var moved *clusters.MovedError
	if err != nil && !(move && errors.As(err, &moved)) {
		return clusters.Cluster{}, nil, nil, err
	}
	in, err := s.Ports.For(ctx, cl.ID)
	if err != nil {
		return clusters.Cluster{}, nil, nil, err
	}
	return cl, in, moved, nil
}

// Prepare checks that the machine of rec can enrol in the cluster named cluster (as
// Approve names it: "" for the record's), computes its member config and has that
// cluster's Incus issue the join token, noting the cluster, expiry and member config in
// the audit event. A move to another cluster than the record's is allowed only while the
// machine is REGISTERED in the one it leaves (no member, no pending token there). It takes
// no lock and writes nothing to the database: call it inside an audited change of the
// machine, which calls Joining after its upstream calls. If what follows fails, call
// Withdraw (inside the change) so no token stays usable.
func (s *Service) Prepare(ctx context.Context, rec *machines.Record, cluster string, overrides []ConfigValue) (*Approval, error) {
	name := rec.Name
	cl, in, moved, err := s.in(ctx, name, rec, cluster, true)
	if err != nil {
		return nil, err
	}
	fact := cl.Name
	switch {
	case moved != nil && rec.Cluster == nil:
		fact += " (the record named no cluster, which counts for " + moved.From.Name + ")"
	case moved != nil:
		fact += " (the record moves from " + moved.From.Name + ")"
	}
	// The cluster the machine joins, and how Apelora reaches it: a plan confirmed after
	// either changed is refused.
	if err := plan.Read(ctx, "cluster of "+name, fact+"; "+cl.Fact()); err != nil {
		return nil, err
	}
	if moved != nil {
		if err := s.leaving(ctx, name, moved); err != nil {
			return nil, err
		}
	}
	snap, err := in.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if snap.Member(name) != nil {
		return nil, apperr.New(apperr.FailedPrecondition, "%s is already an Incus member of cluster %s: there is nothing to enrol (removeMember first to enrol it again)", apperr.Quote(name), cl.Name)
	}
	if snap.PendingProblem != "" {
		return nil, apperr.New(apperr.Unavailable, "cannot tell whether a join token for %s is already pending in cluster %s: %s; try again when every member answers", apperr.Quote(name), cl.Name, snap.PendingProblem)
	}
	if p := snap.PendingFor(name); p != nil {
		return nil, apperr.New(apperr.FailedPrecondition, "a join token for %s is already pending in cluster %s (it expires %s): use it, or revoke it with revokeJoinToken before approving again", apperr.Quote(name), cl.Name, p.ExpiresAt.UTC().Format(time.RFC3339))
	}
	keys, err := in.MemberConfigKeys(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := MemberConfig(keys, overrides)
	if err != nil {
		return nil, err
	}
	// What the new server joins with: the keys the cluster lists and the values copied
	// from its members, beside the administrator's own.
	if err := plan.Read(ctx, "member config of "+name, shownConfig(cfg)); err != nil {
		return nil, err
	}
	tok, err := in.IssueJoinToken(ctx, name)
	if err != nil {
		return nil, err
	}
	if a := audit.ActionFrom(ctx); a != nil {
		a.Detail("cluster", cl.Name)
		if moved != nil {
			a.Detail("movedFrom", moved.From.Name)
		}
		a.Detail("joinTokenExpiresAt", tok.ExpiresAt.UTC().Format(time.RFC3339))
		a.Detail("memberConfig", configDetail(cfg))
	}
	out := &Approval{Name: name, Token: tok.Token, Planned: tok.Planned, ExpiresAt: tok.ExpiresAt, Addresses: tok.Addresses, MemberConfig: cfg,
		Cluster: cl, record: rec.Cluster}
	if moved != nil {
		from := moved.From
		out.MovedFrom = &from
	}
	return out, nil
}

// leaving refuses a move out of a cluster where the machine is not REGISTERED: a member
// there, or a join token pending there for its name (D3: a record's cluster changes only
// while REGISTERED).
func (s *Service) leaving(ctx context.Context, name string, moved *clusters.MovedError) error {
	from, err := s.Ports.For(ctx, moved.From.ID)
	if err != nil {
		return apperr.Wrap(err, apperr.CodeOf(err), "cannot tell whether %s is still enrolled in cluster %s, which its record names: %s; the record moves to %s only once that cluster answers",
			apperr.Quote(name), moved.From.Name, apperr.PublicMessage(err), moved.To.Name)
	}
	snap, err := from.Snapshot(ctx)
	if err != nil {
		return apperr.Wrap(err, apperr.CodeOf(err), "cannot tell whether %s is still enrolled in cluster %s, which its record names: %s; the record moves to %s only once that cluster answers",
			apperr.Quote(name), moved.From.Name, apperr.PublicMessage(err), moved.To.Name)
	}
	if snap.Member(name) != nil {
		return &apperr.Error{Code: apperr.FailedPrecondition, Field: "cluster", Message: fmt.Sprintf(
			"%s is an Incus member of cluster %s: a machine moves to another cluster only while registered and not enrolled; remove it from %s first (removeMember), or leave cluster out",
			apperr.Quote(name), moved.From.Name, moved.From.Name)}
	}
	if snap.PendingProblem != "" {
		return apperr.New(apperr.Unavailable, "cannot tell whether a join token for %s is pending in cluster %s, which its record names: %s; try again when every member answers", apperr.Quote(name), moved.From.Name, snap.PendingProblem)
	}
	if p := snap.PendingFor(name); p != nil {
		return &apperr.Error{Code: apperr.FailedPrecondition, Field: "cluster", Message: fmt.Sprintf(
			"a join token for %s is pending in cluster %s, which its record names (it expires %s): revoke it (revokeJoinToken) before moving the machine to %s",
			apperr.Quote(name), moved.From.Name, p.ExpiresAt.UTC().Format(time.RFC3339), moved.To.Name)}
	}
	return nil
}

// Withdraw revokes the join token of a, best effort, in the cluster that issued it: used
// when the step that issued it could not be completed or recorded.
func (s *Service) Withdraw(ctx context.Context, a *Approval) {
	if s.Ports == nil || a.Planned {
		return // no Incus, or a dry run: no token was issued
	}
	in, err := s.Ports.For(context.WithoutCancel(ctx), a.Cluster.ID)
	if err == nil {
		err = in.RevokeJoinToken(context.WithoutCancel(ctx), a.Name)
	}
	if err != nil && s.Log != nil {
		s.Log.ErrorContext(ctx, "a join token whose step was not completed could not be revoked: revoke it (revokeJoinToken) before it is used", "machine", a.Name, "cluster", a.Cluster.Name, "error", apperr.PublicMessage(err))
	}
}

// ofRecord is the cluster of a call about name with no cluster argument: its record's
// (the environment's for a name without one) and its ports.
func (s *Service) ofRecord(ctx context.Context, name string) (clusters.Cluster, Incus, error) {
	rec, err := s.Store.Record(ctx, name)
	if err != nil {
		return clusters.Cluster{}, nil, err
	}
	cl, in, _, err := s.in(ctx, name, rec, "", false)
	return cl, in, err
}

// shownConfig is the member config as a plan shows it: a secret's value (by the audit's
// rule for setting names) is never shown.
func shownConfig(cfg []ConfigValue) string {
	if len(cfg) == 0 {
		return "none"
	}
	shown := make([]string, len(cfg))
	for i, v := range cfg {
		val := v.Value
		if audit.IsSecretName(v.Key) {
			val = audit.Redacted
		}
		shown[i] = v.ID() + "=" + val
	}
	return strings.Join(shown, ", ")
}

func configDetail(cfg []ConfigValue) []string {
	out := make([]string, len(cfg))
	for i, v := range cfg {
		out[i] = v.ID() + "=" + v.Value
	}
	return out
}

// Revoke cancels the pending join token for name.
func (s *Service) Revoke(ctx context.Context, name string) error {
	if err := machines.ValidateName(name); err != nil {
		return err
	}
	if s.Ports == nil {
		return apperr.NotConfigured(apperr.Incus)
	}
	return s.Store.Audited(ctx, name, func(ctx context.Context) error {
		_, in, err := s.ofRecord(ctx, name)
		if err != nil {
			return err
		}
		snap, err := in.Snapshot(ctx)
		if err != nil {
			return err
		}
		p := snap.PendingFor(name)
		if p == nil && snap.PendingProblem != "" {
			return apperr.New(apperr.Unavailable, "cannot list the pending join tokens: %s; try again when every member answers", snap.PendingProblem)
		}
		if p == nil {
			return apperr.New(apperr.NotFound, "no pending join token for %s: nothing to revoke", apperr.Quote(name))
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("joinTokenExpiresAt", p.ExpiresAt.UTC().Format(time.RFC3339))
		}
		return in.RevokeJoinToken(ctx, name)
	})
}

// Remove removes the member name from the cluster. It is refused, forced or not, when
// Incus's database would lose the majority of its voters or its last member (package
// quorum), and, unforced, while the member still holds instances (Incus refuses that too;
// its refusal stays the backstop). Forced, the member is dropped without being told, its
// instances with it, and its daemon must be wiped.
func (s *Service) Remove(ctx context.Context, name string, force bool) error {
	if err := machines.ValidateName(name); err != nil {
		return err
	}
	if s.Ports == nil {
		return apperr.NotConfigured(apperr.Incus)
	}
	return s.Store.Audited(ctx, name, func(ctx context.Context) error {
		_, in, err := s.ofRecord(ctx, name)
		if err != nil {
			return err
		}
		snap, err := in.Snapshot(ctx)
		if err != nil {
			return err
		}
		m := snap.Member(name)
		if m == nil {
			return apperr.New(apperr.NotFound, "%s is not an Incus member: nothing to remove", apperr.Quote(name))
		}
		if err := plan.Read(ctx, "Incus member "+name, "status "+string(m.Status)); err != nil {
			return err
		}
		proj := quorum.Project(quorum.FromMembership(snap.Members), name)
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("memberStatus", m.Status)
			a.Detail("force", force)
			a.Detail("quorum", proj.Detail())
		}
		rec := plan.From(ctx)
		if rec != nil {
			rec.Project(proj)
			for _, w := range proj.Warnings {
				rec.Warn("", "%s", w)
			}
		}
		if w := throughWarning(in, m); w != "" {
			if a := audit.ActionFrom(ctx); a != nil {
				a.Detail("talksThrough", m.URL)
			}
			if rec != nil {
				rec.Warn("", "%s", w)
			}
		}
		var refusals []error
		if proj.Refused() {
			refusals = append(refusals, apperr.New(apperr.FailedPrecondition, "%s cannot be removed, forced or not: %s", apperr.Quote(name), proj.Refusals[0]))
		}
		// A plan shows every refusal; the real call stops at the first.
		if len(refusals) > 0 && rec == nil {
			return refusals[0]
		}
		if m.Status == membership.StatusOffline {
			if !force {
				refusals = append(refusals, apperr.New(apperr.FailedPrecondition, "%s is Offline (Incus: %s): Incus removes a member without force only through the member itself, which must delete its storage pools and networks first. On Incus 6.0 a member that refuses connections fails the removal at once and stays a member, and one that hangs holds the removal, and every member's heartbeat (the cluster lists them all Offline), until it answers, then completes it. Bring %s back online and remove it, or, if it will not come back, make sure it is off (its fence, or MAAS) and remove it with force",
					apperr.Quote(name), m.Message, name))
			} else if rec != nil {
				rec.Warn("", "forced: Incus removes the Offline %s from its database without contacting it; should its daemon start again it still believes it is a member (it waits for the cluster's database for ever): reinstall it before it comes back", name)
			}
		}
		if len(refusals) > 0 && rec == nil {
			return refusals[0]
		}
		held, err := in.InstancesOn(ctx, name)
		if err != nil {
			return err
		}
		if err := plan.Read(ctx, "instances on "+name, orNone(held)); err != nil {
			return err
		}
		switch {
		case len(held) > 0 && !force:
			refusals = append(refusals, apperr.New(apperr.FailedPrecondition, "%s still holds %d %s (%s): evacuate it first, or move or delete %s; force removes it with %s, lost",
				apperr.Quote(name), len(held), plural(len(held), "instance", "instances"), strings.Join(held, ", "), plural(len(held), "it", "them"), plural(len(held), "it", "them")))
		case len(held) > 0 && rec != nil:
			rec.Warn("", "forced: %s is dropped with its %d %s (%s), which are lost; evacuate it first to keep them", name, len(held), plural(len(held), "instance", "instances"), strings.Join(held, ", "))
		}
		if len(refusals) > 0 {
			if rec != nil {
				for _, r := range refusals {
					rec.Refuse(r)
				}
			}
			return refusals[0]
		}
		err = in.RemoveMember(ctx, name, force)
		if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// No answer within the request timeout is no answer about the removal: Incus may
			// still carry it out (removing the database leader took 6.7 s on a lab; one held by
			// a member that hangs completes when it answers). Follow it to its end.
			err = s.followRemoval(ctx, in, name, err)
		}
		if err != nil {
			return err
		}
		// The admission was of the member that is gone (written after Incus removed it: a
		// change's database writes follow its upstream calls).
		return s.Store.EndAdmission(ctx, name)
	})
}

// removalFollow bounds how long a removal whose request got no answer is followed (within
// a change's own bound of three minutes).
var removalFollow = 2 * time.Minute

// followRemoval reads the members until Incus no longer lists name (the removal happened:
// the change succeeds) or removalFollow has passed (it fails, saying what Incus shows).
func (s *Service) followRemoval(ctx context.Context, in Incus, name string, cause error) error {
	began := time.Now()
	a := audit.ActionFrom(ctx)
	if s.Log != nil {
		s.Log.InfoContext(ctx, "Incus did not answer a member's removal: following it to its end", "machine", name, "for", removalFollow.String(), "error", apperr.PublicMessage(cause))
	}
	for {
		snap, err := in.Snapshot(ctx)
		if err == nil && snap.Member(name) == nil {
			if a != nil {
				a.Detail("removalFollowedSeconds", int64(time.Since(began)/time.Second))
			}
			return nil
		}
		if time.Since(began) >= removalFollow {
			listed := "could not be read"
			if err == nil {
				m := snap.Member(name)
				listed = fmt.Sprintf("still lists %s (%s)", name, m.Status)
			}
			return apperr.Wrap(cause, apperr.Unavailable, "Incus did not answer the removal of %s, and %s after following it for %s: it may still complete it (a member that hangs holds its own removal until it answers); look at `incus cluster list`, then remove %s again or with force",
				apperr.Quote(name), listed, removalFollow, name)
		}
		select {
		case <-ctx.Done():
			return cause
		case <-time.After(time.Second):
		}
	}
}

func recordCluster(rec *machines.Record) *int64 {
	if rec == nil {
		return nil
	}
	return rec.Cluster
}

// throughWarning says what removing m does to Apelora's connection to Incus, when m is the
// member Apelora talks through ("" otherwise).
func throughWarning(in Incus, m *membership.Member) string {
	through, configured := in.Through()
	if through == "" || m.URL == "" || strings.TrimRight(m.URL, "/") != through {
		return ""
	}
	w := fmt.Sprintf("Apelora talks to Incus through %s (%s): the removal is sent through another member, and Apelora goes on through the members it learned from the cluster", m.Name, through)
	others := 0
	for _, u := range configured {
		if u != through {
			others++
		}
	}
	if others == 0 {
		w += "; APELORA_INCUS_URL names only this member, so Apelora could not reach Incus after its next restart: set APELORA_INCUS_URL to another member's URL (on the API and the worker) before then"
	}
	return w
}

// Command is what the administrator runs on the new server: fetch enrol-member.sh from
// Apelora, then run it with the member config; it reads the join token from standard
// input (paste it when asked, or pipe it from a file).
func Command(baseURL string, a *Approval) string {
	var b strings.Builder
	fmt.Fprintf(&b, "curl -fsSL -o enrol-member.sh %s/enrol/enrol-member.sh && sh enrol-member.sh --name %s --address ADDRESS:8443", strings.TrimSuffix(baseURL, "/"), a.Name)
	for _, v := range a.MemberConfig {
		fmt.Fprintf(&b, " --member-config %s", shellQuote(v.ID()+"="+v.Value))
	}
	return b.String()
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// JudgeStep says what became of an approveEnrolment, revokeJoinToken or removeMember whose
// outcome its process did not record (package changes), from Incus's members and pending
// join tokens, and records the database facts of that outcome (the admission a join or a
// removal ends).
func (s *Service) JudgeStep(ctx context.Context, st changes.Step) (changes.Verdict, error) {
	if s.Ports == nil {
		return changes.Verdict{}, apperr.NotConfigured(apperr.Incus)
	}
	name := st.Machine
	// An approval's cluster is the one its input named (the record's when none): the record
	// is written in the step's own transaction, so a step never recorded left it as it was.
	// Revoking and removing act in the record's cluster.
	rec, err := s.Store.Record(ctx, name)
	if err != nil {
		return changes.Verdict{}, err
	}
	given := ""
	if st.Action == "approveEnrolment" {
		given = st.Text("cluster")
	}
	cl, in, _, err := s.in(ctx, name, rec, given, true)
	if err != nil {
		return changes.Verdict{}, err
	}
	snap, err := in.Snapshot(ctx)
	if err != nil {
		return changes.Verdict{}, err
	}
	pending := snap.PendingFor(name)
	if pending == nil && snap.PendingProblem != "" && st.Action != "removeMember" {
		return changes.Verdict{}, apperr.New(apperr.Unavailable, "cannot list the pending join tokens: %s", snap.PendingProblem)
	}
	switch st.Action {
	case "approveEnrolment":
		switch {
		case pending != nil:
			if err := s.Joining(ctx, &Approval{Name: name, Cluster: cl, record: recordCluster(rec)}); err != nil {
				return changes.Verdict{}, err
			}
			return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("Incus holds a join token for %s (it expires %s); the answer that carried it was lost with the process, so nobody has it: revoke it (revokeJoinToken) and approve again",
				name, pending.ExpiresAt.UTC().Format(time.RFC3339))}, nil
		case snap.Member(name) != nil:
			if err := s.Joining(ctx, &Approval{Name: name, Cluster: cl, record: recordCluster(rec)}); err != nil {
				return changes.Verdict{}, err
			}
			return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("%s is an Incus member of cluster %s: its join token was issued and used", name, cl.Name)}, nil
		}
		return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("Incus holds no join token for %s and it is no member: no token was issued", name)}, nil
	case "revokeJoinToken":
		if pending != nil {
			return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("the join token for %s is still pending: it was not revoked", name)}, nil
		}
		return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("Incus holds no join token for %s: it was revoked", name)}, nil
	case "removeMember":
		if m := snap.Member(name); m != nil {
			return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("%s is still an Incus member (%s): it was not removed", name, m.Status)}, nil
		}
		if err := s.Store.EndAdmission(ctx, name); err != nil {
			return changes.Verdict{}, err
		}
		return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("%s is no Incus member any more: it was removed", name)}, nil
	}
	return changes.Verdict{}, apperr.New(apperr.Internal, "enrolment judges no %s step", st.Action)
}
