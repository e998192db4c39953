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
}

// Service performs the enrolment steps.
type Service struct {
	Incus Incus
	Store Store
	Now   func() time.Time
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

// Approve has Incus issue a join token for the registered machine name.
func (s *Service) Approve(ctx context.Context, name string, overrides []ConfigValue) (*Approval, error) {
	if _, err := machines.Registered(ctx, s.Store, name, "register the machine before approving its enrolment"); err != nil {
		return nil, err
	}
	var approval *Approval
	err := s.Store.Audited(ctx, name, func(ctx context.Context) error {
		// Read again under the machine's lock: it may have been unregistered meanwhile.
		if _, err := machines.Registered(ctx, s.Store, name, "it was unregistered meanwhile"); err != nil {
			return err
		}
		var err error
		if approval, err = s.Prepare(ctx, name, overrides); err != nil {
			return err
		}
		// A new join begins: whatever admission the name had was of a member that is gone
		// (removed outside Apelora), and the new member is admitted afresh. Written after
		// Incus issued the token (a change's database writes follow its upstream calls).
		if err := s.Store.EndAdmission(ctx, name); err != nil {
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

// Prepare checks that name can enrol (not a member, no pending token), computes its
// member config and has Incus issue the join token, noting the expiry and member config
// in the audit event. It takes no lock and writes nothing to the database: call it inside
// an audited change of the machine, which ends the machine's open admission (EndAdmission)
// after its upstream calls. If what follows fails, call Withdraw (inside the change) so no
// token stays usable.
func (s *Service) Prepare(ctx context.Context, name string, overrides []ConfigValue) (*Approval, error) {
	if s.Incus == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	snap, err := s.Incus.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if snap.Member(name) != nil {
		return nil, apperr.New(apperr.FailedPrecondition, "%s is already an Incus member: there is nothing to enrol (removeMember first to enrol it again)", apperr.Quote(name))
	}
	if snap.PendingProblem != "" {
		return nil, apperr.New(apperr.Unavailable, "cannot tell whether a join token for %s is already pending: %s; try again when every member answers", apperr.Quote(name), snap.PendingProblem)
	}
	if p := snap.PendingFor(name); p != nil {
		return nil, apperr.New(apperr.FailedPrecondition, "a join token for %s is already pending (it expires %s): use it, or revoke it with revokeJoinToken before approving again", apperr.Quote(name), p.ExpiresAt.UTC().Format(time.RFC3339))
	}
	keys, err := s.Incus.MemberConfigKeys(ctx)
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
	tok, err := s.Incus.IssueJoinToken(ctx, name)
	if err != nil {
		return nil, err
	}
	if a := audit.ActionFrom(ctx); a != nil {
		a.Detail("joinTokenExpiresAt", tok.ExpiresAt.UTC().Format(time.RFC3339))
		a.Detail("memberConfig", configDetail(cfg))
	}
	return &Approval{Name: name, Token: tok.Token, Planned: tok.Planned, ExpiresAt: tok.ExpiresAt, Addresses: tok.Addresses, MemberConfig: cfg}, nil
}

// Withdraw revokes the join token for name, best effort: used when the step that issued
// it could not be completed or recorded.
func (s *Service) Withdraw(ctx context.Context, name string) {
	if s.Incus == nil {
		return // no Incus: no token was issued
	}
	if err := s.Incus.RevokeJoinToken(context.WithoutCancel(ctx), name); err != nil && s.Log != nil {
		s.Log.ErrorContext(ctx, "a join token whose step was not completed could not be revoked: revoke it (revokeJoinToken) before it is used", "machine", name, "error", apperr.PublicMessage(err))
	}
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
	if s.Incus == nil {
		return apperr.NotConfigured(apperr.Incus)
	}
	return s.Store.Audited(ctx, name, func(ctx context.Context) error {
		snap, err := s.Incus.Snapshot(ctx)
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
		return s.Incus.RevokeJoinToken(ctx, name)
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
	if s.Incus == nil {
		return apperr.NotConfigured(apperr.Incus)
	}
	return s.Store.Audited(ctx, name, func(ctx context.Context) error {
		snap, err := s.Incus.Snapshot(ctx)
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
		if w := throughWarning(s.Incus, m); w != "" {
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
		held, err := s.Incus.InstancesOn(ctx, name)
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
		err = s.Incus.RemoveMember(ctx, name, force)
		if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// No answer within the request timeout is no answer about the removal: Incus may
			// still carry it out (removing the database leader took 6.7 s on a lab; one held by
			// a member that hangs completes when it answers). Follow it to its end.
			err = s.followRemoval(ctx, name, err)
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
func (s *Service) followRemoval(ctx context.Context, name string, cause error) error {
	began := time.Now()
	a := audit.ActionFrom(ctx)
	if s.Log != nil {
		s.Log.InfoContext(ctx, "Incus did not answer a member's removal: following it to its end", "machine", name, "for", removalFollow.String(), "error", apperr.PublicMessage(cause))
	}
	for {
		snap, err := s.Incus.Snapshot(ctx)
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
	if s.Incus == nil {
		return changes.Verdict{}, apperr.NotConfigured(apperr.Incus)
	}
	name := st.Machine
	snap, err := s.Incus.Snapshot(ctx)
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
			if err := s.Store.EndAdmission(ctx, name); err != nil {
				return changes.Verdict{}, err
			}
			return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("Incus holds a join token for %s (it expires %s); the answer that carried it was lost with the process, so nobody has it: revoke it (revokeJoinToken) and approve again",
				name, pending.ExpiresAt.UTC().Format(time.RFC3339))}, nil
		case snap.Member(name) != nil:
			if err := s.Store.EndAdmission(ctx, name); err != nil {
				return changes.Verdict{}, err
			}
			return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("%s is an Incus member: its join token was issued and used", name)}, nil
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
