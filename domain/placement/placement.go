// Package placement is the placement guard: an Incus placement scriptlet that keeps every
// member without Apelora's admission mark out of untargeted placement, from the instant it
// joins. Without it a member is placeable between its join and the enrol script's hold.
//
// The scriptlet is the cluster's one instances.placement.scriptlet. Apelora recognises
// its own by its exact text (Scriptlet) and never replaces or removes one it did not
// write: turning the guard on refuses over a foreign scriptlet, and turning it off
// refuses when the scriptlet there is no longer Apelora's. Since the guard is only ever
// installed where no scriptlet was, turning it off restores exactly what was there before
// (no scriptlet); nothing needs keeping.
package placement

import (
	"context"
	"fmt"
	"strings"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// MarkKey is the admission mark (lifecycle.AdmissionKey) that admitMember sets on every
// member it admits: the guard places untargeted instances only on members carrying it.
// One key, defined where the phase rule that reads it lives.
const MarkKey = lifecycle.AdmissionKey

// ScriptletKey is the Incus server setting that holds the placement scriptlet.
const ScriptletKey = "instances.placement.scriptlet"

// Header is the first line of the guard's scriptlet: it says whose it is, and which
// version, to whoever reads `incus config get instances.placement.scriptlet`.
const Header = "# apelora placement guard v2"

// Scriptlet is the guard, in Starlark, as Incus 6.0 runs it.
//
// Incus 6.0 calls instance_placement for targeted requests too, with the target as the
// only candidate, and does not say whether a target was given (the request carries no
// target: checked on a live 6.0.4). What does tell them apart:
//   - a held member (scheduler.instance=manual) is never a candidate of an untargeted
//     request, so a held sole candidate was named by the request: it lands, on any
//     cluster size;
//   - a sole candidate without the mark is let through when another usable member exists
//     (get_cluster_members: online, not evacuated, not held): the request named it.
//
// Otherwise (an unheld, unmarked sole member: run.sh's founding member) the request is
// refused, targeted or not, rather than risk placing on an unadmitted member, and the
// message says what to do: admit a member, or hold it so a targeted request lands. An
// evacuation never names its target, so it always needs an admitted member. Candidates
// come sorted by instance count: the first admitted one is the member Incus's own
// placement would choose among the admitted. Returning a string fails the request with
// that string in Incus's error.
const Scriptlet = Header + `
# Written by Apelora (setPlacementGuard). Untargeted placement (new instances, evacuation,
# relocation) goes only to members carrying the ` + MarkKey + ` mark, which admitting a
# member sets; a request that targets a member still lands there. Apelora recognises this
# exact text: turn it off with ` + "`apeloractl placement-guard off`" + `, do not edit it.

MARK = "` + MarkKey + `"

def admitted(member):
    return member.config.get(MARK, "") != ""

def held(member):
    return member.config.get("scheduler.instance", "") == "manual"

def instance_placement(request, candidate_members):
    ok = [m for m in candidate_members if admitted(m)]
    if len(candidate_members) == 1 and not ok and request.reason != "evacuation":
        only = candidate_members[0]
        if held(only):
            return
        others = [m for m in get_cluster_members() if m.server_name != only.server_name]
        if others:
            return
    if not ok:
        names = ", ".join([m.server_name for m in candidate_members]) or "none"
        return "apelora placement guard: no admitted cluster member can take instance %s (%s; candidates: %s). Admit a member first (Fabric Console: Admit on its page; or apeloractl admit NAME); until then a request lands only on a held member it targets (incus cluster set NAME scheduler.instance=manual, then --target NAME)" % (request.name, request.reason, names)
    set_target(ok[0].server_name)
    return
`

// Earlier are the guards earlier versions of Apelora installed, by their exact text: still
// Apelora's (ON, Outdated), so turning the guard on replaces one and off removes it.
var Earlier = []string{scriptletV1}

// scriptletV1 is version 1, verbatim: on a one-member cluster it refused a request that
// targeted the member, held or not, with advice that did not work there.
const scriptletV1 = "# apelora placement guard v1" + `
# Written by Apelora (setPlacementGuard). Untargeted placement (new instances, evacuation,
# relocation) goes only to members carrying the ` + MarkKey + ` mark, which admitMember
# sets; a request that targets a member still lands there. Apelora recognises this exact
# text: turn it off with ` + "`apeloractl placement-guard off`" + `, do not edit it.

MARK = "` + MarkKey + `"

def admitted(member):
    return member.config.get(MARK, "") != ""

def instance_placement(request, candidate_members):
    ok = [m for m in candidate_members if admitted(m)]
    if len(candidate_members) == 1 and not ok and request.reason != "evacuation":
        only = candidate_members[0].server_name
        others = [m for m in get_cluster_members() if m.server_name != only]
        if others:
            return
    if not ok:
        names = ", ".join([m.server_name for m in candidate_members]) or "none"
        return "apelora placement guard: no admitted cluster member can take instance %s (%s; candidates: %s); admit a member with admitMember, or name a target" % (request.name, request.reason, names)
    set_target(ok[0].server_name)
    return
`

// State is whether the guard is in place.
type State string

const (
	On  State = "ON"  // the scriptlet is Apelora's guard, as this version writes it
	Off State = "OFF" // no placement scriptlet: Incus places on any candidate
	// Foreign: a scriptlet Apelora did not write (or one edited since): Apelora leaves it be.
	Foreign State = "FOREIGN"
)

// Status is the guard's state and, for a foreign scriptlet, what was found.
type Status struct {
	State State
	// Found quotes the start of a foreign scriptlet (apperr.Quote: bounded, escaped).
	Found string
	// Outdated: ON, with the guard an earlier version of Apelora installed (turning the
	// guard on installs this version's).
	Outdated bool
	// Marked lists the members carrying the admission mark, when MarksKnown (the member
	// list could be read): with the guard on and none, every untargeted placement fails.
	Marked     []string
	MarksKnown bool
}

// Unplaceable reports a guard that is on while no member carries the mark: Incus then
// refuses every untargeted placement until a member is admitted.
func (s Status) Unplaceable() bool { return s.State == On && s.MarksKnown && len(s.Marked) == 0 }

// Judge says what the scriptlet value found in Incus means for the guard.
func Judge(scriptlet string) Status {
	switch scriptlet {
	case Scriptlet:
		return Status{State: On}
	case "":
		return Status{State: Off}
	}
	for _, e := range Earlier {
		if scriptlet == e {
			return Status{State: On, Outdated: true}
		}
	}
	return Status{State: Foreign, Found: apperr.Quote(scriptlet)}
}

// Message is the state in an administrator's words.
func (s Status) Message() string {
	switch s.State {
	case On:
		outdated := ""
		if s.Outdated {
			outdated = " (the guard of an earlier Apelora version: turn it on again to install this version's, setPlacementGuard or apeloractl placement-guard on)"
		}
		if s.Unplaceable() {
			return "the placement guard is on, but no member carries the admission mark (" + MarkKey + ") yet: Incus refuses every untargeted placement until admitMember admits a member" + outdated
		}
		return "the placement guard is on: Incus places untargeted instances only on members admitted by Apelora" + outdated
	case Off:
		return "the placement guard is off: Incus may place instances on a member between its join and the enrol script's hold; turn it on with setPlacementGuard (apeloractl placement-guard on)"
	}
	return "Incus has a placement scriptlet Apelora did not write (" + s.Found + "): the placement guard is not in place; Apelora leaves that scriptlet as it is"
}

// Incus is the cluster's placement scriptlet setting.
type Incus interface {
	// PlacementScriptlet returns instances.placement.scriptlet ("" when unset) and the
	// ETag of the server configuration it was read with.
	PlacementScriptlet(ctx context.Context) (value, etag string, err error)
	// SetPlacementScriptlet sets it ("" unsets it) if the configuration still has etag.
	SetPlacementScriptlet(ctx context.Context, value, etag string) error
	Members(ctx context.Context) ([]membership.Member, error)
}

// Store runs a change that writes the mutation's audit event (no machine to lock: two
// concurrent changes are told apart by Incus's ETag).
type Store interface {
	Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error
}

// Service turns the guard on and off and reads its state, each cluster's its own (the
// guard is a setting of the cluster).
type Service struct {
	// Ports finds a cluster's Incus ports (the connection pool); Clusters lists the
	// registered clusters. Either nil: Incus is not configured.
	Ports    clusters.Ports[Incus]
	Clusters clusters.Lister
	Store    Store
}

// Default is the cluster the deprecated cluster view's placementGuard is about: the
// environment's (APELORA_INCUS_*), or the only one registered.
func (s *Service) Default() (clusters.Cluster, error) {
	if s.Ports == nil || s.Clusters == nil {
		return clusters.Cluster{}, apperr.NotConfigured(apperr.Incus)
	}
	return clusters.OfRecord(s.Clusters.All(), "", nil, "")
}

// Cluster is the cluster a setPlacementGuard is about (clusters.Resolve, no machine):
// the one named (NOT_FOUND on field cluster when none is called so), else the only one
// registered (INVALID_INPUT naming them when there are several).
func (s *Service) Cluster(given string) (clusters.Cluster, error) {
	if s.Ports == nil || s.Clusters == nil {
		return clusters.Cluster{}, apperr.NotConfigured(apperr.Incus)
	}
	return clusters.Resolve(s.Clusters.All(), "", nil, given)
}

func (s *Service) in(ctx context.Context, cluster int64) (Incus, error) {
	if s.Ports == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	return s.Ports.For(ctx, cluster)
}

// Status reads the guard's state from the cluster's Incus.
func (s *Service) Status(ctx context.Context, cluster int64) (Status, error) {
	in, err := s.in(ctx, cluster)
	if err != nil {
		return Status{}, err
	}
	v, _, err := in.PlacementScriptlet(ctx)
	if err != nil {
		return Status{}, err
	}
	return withMarks(ctx, in, Judge(v)), nil
}

// withMarks adds who carries the mark to an ON status. The member list failing leaves
// the marks unknown: the guard's state is still known.
func withMarks(ctx context.Context, in Incus, st Status) Status {
	if st.State != On {
		return st
	}
	members, err := in.Members(ctx)
	if err != nil {
		return st
	}
	st.MarksKnown, st.Marked = true, []string{}
	for _, m := range members {
		if m.Config[MarkKey] != "" {
			st.Marked = append(st.Marked, m.Name)
		}
	}
	return st
}

// Set turns the guard on (installs Scriptlet where no scriptlet is, or over an earlier
// version's guard) or off (removes Apelora's guard, of any version), and returns the state after, read back from Incus. Setting the state it is already in changes
// nothing in Incus and is still audited. A foreign scriptlet is never touched.
func (s *Service) Set(ctx context.Context, cluster clusters.Cluster, enabled bool) (Status, error) {
	in, err := s.in(ctx, cluster.ID)
	if err != nil {
		return Status{}, err
	}
	var after Status
	err = s.Store.Audited(ctx, "", func(ctx context.Context) error {
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("cluster", cluster.Name)
		}
		if err := plan.Read(ctx, "cluster", cluster.Name+"; "+cluster.Fact()); err != nil {
			return err
		}
		cur, etag, err := in.PlacementScriptlet(ctx)
		if err != nil {
			return err
		}
		now := Judge(cur)
		want, value := Off, ""
		if enabled {
			want, value = On, Scriptlet
		}
		if now.State == Foreign {
			return refusal(enabled, now)
		}
		if rec := plan.From(ctx); rec != nil {
			if target := withMarks(ctx, in, Status{State: want}); target.Unplaceable() {
				rec.Warn("", "%s", target.Message())
			}
		}
		if now.State != want || now.Outdated {
			if err := in.SetPlacementScriptlet(ctx, value, etag); err != nil {
				return err
			}
		}
		// The state as it now is, read again: after the write, or, in a dry run (where the
		// write was a call of the plan), as it stands, so a plan's payload shows only what exists.
		cur, _, err = in.PlacementScriptlet(ctx)
		if err != nil {
			return err
		}
		after = withMarks(ctx, in, Judge(cur))
		return nil
	})
	if err != nil {
		return Status{}, err
	}
	return after, nil
}

func refusal(enabled bool, found Status) error {
	if enabled {
		return apperr.New(apperr.FailedPrecondition,
			"cannot turn the placement guard on: Incus already has a placement scriptlet that Apelora did not write (%s), and Apelora does not overwrite it; "+
				"fold its rules and the guard's (docs/machines.md: The placement guard) into one scriptlet of your own, or remove it with `incus config unset %s` and turn the guard on again",
			found.Found, ScriptletKey)
	}
	return apperr.New(apperr.FailedPrecondition,
		"cannot turn the placement guard off: the placement scriptlet in Incus is not Apelora's guard (%s; someone replaced it), so Apelora leaves it as it is; "+
			"if it should go, remove it with `incus config unset %s`", found.Found, ScriptletKey)
}

// JudgeStep says what became of a setPlacementGuard whose outcome its process did not
// record (package changes): Incus's scriptlet now, against the state asked for.
func (s *Service) JudgeStep(ctx context.Context, st changes.Step) (changes.Verdict, error) {
	cl, err := s.Cluster(st.Text("cluster"))
	if err != nil {
		return changes.Verdict{}, err
	}
	in, err := s.in(ctx, cl.ID)
	if err != nil {
		return changes.Verdict{}, err
	}
	v, _, err := in.PlacementScriptlet(ctx)
	if err != nil {
		return changes.Verdict{}, err
	}
	enabled, _ := st.Input()["enabled"].(bool)
	want := Off
	if enabled {
		want = On
	}
	now := Judge(v).State
	if now == want {
		return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("Incus's placement scriptlet is Apelora's guard %s, as asked", strings.ToLower(string(now)))}, nil
	}
	return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("Incus's placement guard is %s, not %s as asked: it was not changed", now, want)}, nil
}
