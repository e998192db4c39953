package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// Members reads and writes one member. UpdateMember sends every writable field of m
// (config, description, roles, groups, failure domain), guarded by etag: Incus rewrites
// all of them on a write, so anything not sent back would be lost.
type Members interface {
	Member(ctx context.Context, name string) (membership.Member, string, error)
	UpdateMember(ctx context.Context, m membership.Member, etag string) error
}

// Store is what admitting needs from the database.
type Store interface {
	// Audited runs fn holding the machine's lock, and writes the audit event of the
	// mutation in progress when fn succeeds.
	Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error
	Record(ctx context.Context, name string) (*machines.Record, error)
	// OpenAdmission returns the machine's open admission record, nil for none.
	OpenAdmission(ctx context.Context, machine string) (*lifecycle.Admission, error)
	// NextAdmissionID draws the id of the admission about to be made (0 in a dry run):
	// the mark Incus carries names it before the record is written.
	NextAdmissionID(ctx context.Context) (int64, error)
	// RecordAdmission records a in the change in progress, ending the machine's open
	// admission if it has one, and returns its id (a.ID, or a new one when 0). The id of
	// the change's audit event is kept with it once the event is inserted.
	RecordAdmission(ctx context.Context, a Admitted) (int64, error)
}

// Admitted is an admission as Apelora records it: the member as Incus listed it when it
// was admitted (drift compares the member with these later), who admitted it and in which
// request.
type Admitted struct {
	// ID is the record's id when it was drawn already (NextAdmissionID), 0 for a new one.
	ID int64
	// Cluster is the id of the cluster the member is admitted in (the record's).
	Cluster       int64
	Machine       string
	Member        string
	Roles         []string
	Groups        []string
	FailureDomain string
	By            string
	RequestID     string
}

// AdmittedRolesDetail is the admission audit event's detail that lists the member's roles
// as Incus listed them when it was admitted.
const AdmittedRolesDetail = "roles"

// AdmissionDetail is the admission audit event's detail that names the admission record.
const AdmissionDetail = "admission"

// Service runs reports and admits members.
type Service struct {
	Checker *Checker
	// Members finds a cluster's member reads and writes (the connection pool): a machine
	// is admitted in its record's cluster (Checker.Cluster). Nil: Incus is not configured.
	Members clusters.Ports[Members]
	Store   Store
}

// in names the cluster a step about machine acts in (its record's) and returns its ports.
func (s *Service) in(ctx context.Context, name string, rec *machines.Record) (clusters.Cluster, Incus, Members, error) {
	if s.Members == nil {
		return clusters.Cluster{}, nil, nil, apperr.NotConfigured(apperr.Incus)
	}
	cl, in, err := s.Checker.Cluster(ctx, name, rec)
	if err != nil {
		return clusters.Cluster{}, nil, nil, err
	}
	members, err := s.Members.For(ctx, cl.ID)
	if err != nil {
		return clusters.Cluster{}, nil, nil, err
	}
	return cl, in, members, nil
}

// Report runs the checks and changes nothing.
func (s *Service) Report(ctx context.Context, name string) (*Report, error) {
	if err := machines.ValidateName(name); err != nil {
		return nil, err
	}
	rec, err := s.Store.Record(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Checker.Run(ctx, name, rec, TriggerReport)
}

// Admit re-reads Incus, runs every check and, when none fails, lets automatic placement
// reach the member: one member update that removes scheduler.instance, sets the admission
// mark (lifecycle.AdmissionKey) and sends back roles, groups, failure domain and description
// unchanged, guarded by the ETag read before the checks; the admission is recorded in the
// same change. The check results go into the audit event either way.
func (s *Service) Admit(ctx context.Context, name string) (*Report, error) {
	rec, err := machines.Registered(ctx, s.Store, name, "only registered machines are admitted (registerMachine first)")
	if err != nil {
		return nil, err
	}
	if s.Members == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	var report *Report
	err = s.Store.Audited(ctx, name, func(ctx context.Context) error {
		// Read again under the machine's lock: it may have been unregistered meanwhile.
		if rec, err = machines.Registered(ctx, s.Store, name, "it was unregistered meanwhile"); err != nil {
			return err
		}
		cl, in, members, err := s.in(ctx, name, rec)
		if err != nil {
			return err
		}
		// The cluster the member is admitted in, and how Apelora reaches it.
		if err := plan.Read(ctx, "cluster of "+name, cl.Name+"; "+cl.Fact()); err != nil {
			return err
		}
		if act := audit.ActionFrom(ctx); act != nil {
			act.Detail("cluster", cl.Name)
		}
		member, etag, err := members.Member(ctx, name)
		if apperr.Is(err, apperr.NotFound) {
			return apperr.Wrap(err, apperr.NotFound, "%s is not an Incus member of cluster %s: approve its enrolment (in that cluster, or name another) and run enrol-member.sh on it first", apperr.Quote(name), cl.Name)
		}
		if err != nil {
			return err
		}
		open, err := s.Store.OpenAdmission(ctx, name)
		if err != nil {
			return err
		}
		switch phase, _ := lifecycle.Derive(MemberFacts(&member, open)); phase {
		case lifecycle.Admitted:
			return apperr.New(apperr.FailedPrecondition, "%s is already admitted: placement reaches it", apperr.Quote(name))
		case lifecycle.Evacuated:
			return apperr.New(apperr.FailedPrecondition, "%s is evacuated (in maintenance): restore it (restoreMember), which runs the admission checks again", apperr.Quote(name))
		}
		report, err = s.Checker.RunIn(ctx, cl, in, name, rec, TriggerAdmission)
		if err != nil {
			return err
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("checks", report.Checks)
			a.Detail("verdict", report.Verdict)
			a.Detail("runId", report.RunID)
			// The roles the member is admitted with: drift compares the member with them later
			// (a member update without the role list drops roles).
			a.Detail(AdmittedRolesDetail, append([]string{}, member.Roles...))
		}
		if r := plan.From(ctx); r != nil {
			for _, c := range report.Checks {
				if c.Result == Warn {
					r.Warn("", "%s: %s", c.Title, c.Message)
				}
			}
		}
		if failed := report.Failed(); len(failed) > 0 {
			names := make([]string, len(failed))
			for i, f := range failed {
				names[i] = f.Name
			}
			return &apperr.Error{
				Code:    apperr.FailedPrecondition,
				Message: BlockedBy(failed),
				Details: map[string]any{"failedChecks": names, "runId": report.RunID},
			}
		}
		// The admission is a fact of its own, and Incus carries its mark, which names the
		// record: its id is drawn first, the member updated (the step's intent is recorded
		// before), then the record written in the transaction of the outcome (a change's
		// database writes follow its upstream calls). A step cut off between the two is
		// finished by the reconciler from the mark (Judge).
		a := Admitted{Cluster: cl.ID, Machine: name, Member: member.Name, Roles: append([]string{}, member.Roles...),
			Groups: append([]string{}, member.Groups...), FailureDomain: member.FailureDomain}
		if act := audit.ActionFrom(ctx); act != nil {
			a.By, a.RequestID = act.Actor, act.RequestID
		}
		id, err := s.Store.NextAdmissionID(ctx)
		if err != nil {
			return err
		}
		a.ID = id
		if act := audit.ActionFrom(ctx); act != nil && id != 0 {
			act.Detail(AdmissionDetail, id)
		}
		release := member
		release.Config = maps.Clone(member.Config)
		if release.Config == nil {
			release.Config = map[string]string{}
		}
		if member.Held() {
			delete(release.Config, membership.SchedulerKey)
		}
		release.Config[lifecycle.AdmissionKey] = lifecycle.AdmissionMark(id, a.RequestID)
		if err := members.UpdateMember(ctx, release, etag); err != nil {
			return err
		}
		_, err = s.Store.RecordAdmission(ctx, a)
		return err
	})
	if err != nil {
		return report, err
	}
	return report, nil
}

// MemberFacts are the lifecycle facts of a registered machine's member m, with open its
// open admission record (nil for none): what Admit asks the lifecycle before admitting.
func MemberFacts(m *membership.Member, open *lifecycle.Admission) lifecycle.Facts {
	mark, marked := m.Config[lifecycle.AdmissionKey]
	return lifecycle.Facts{HasRecord: true, IncusKnown: true, IsMember: true, Scheduler: m.Scheduler(), Evacuated: m.Evacuated(),
		Marked: marked, Mark: mark, Admission: open}
}

// BlockedBy is the one wording of a blocked admission (verdict BLOCKED), naming the
// failed checks: the refusal of admitMember (and so of its dry run), the line under
// apeloractl's report, and the reason on the console's Admit button (lib/actions.ts
// admitReason, whose test holds the same case as TestBlockedByIsOneWording) all say it.
func BlockedBy(failed []Check) string { return "admission blocked by " + failedSummary(failed) }

func failedSummary(failed []Check) string {
	s := ""
	for i, f := range failed {
		if i > 0 {
			s += "; "
		}
		s += f.Title + ": " + f.Message
	}
	return s
}

// JudgeStep says what became of an admitMember (or a markAdmission) whose outcome its
// process did not record (package changes): the member either carries the mark naming the
// admission the step drew, or it does not. Admitted, the admission record is written now
// (the database fact of that outcome), with the id the mark names.
func (s *Service) JudgeStep(ctx context.Context, st changes.Step) (changes.Verdict, error) {
	if s.Members == nil {
		return changes.Verdict{}, apperr.NotConfigured(apperr.Incus)
	}
	id := detailID(st.Details[AdmissionDetail])
	if id == 0 {
		id = detailID(st.Parameters[AdmissionDetail])
	}
	rec, err := s.Store.Record(ctx, st.Machine)
	if err != nil {
		return changes.Verdict{}, err
	}
	cl, _, members, err := s.in(ctx, st.Machine, rec)
	if err != nil {
		return changes.Verdict{}, err
	}
	member, _, err := members.Member(ctx, st.Machine)
	if apperr.Is(err, apperr.NotFound) {
		return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("%s is no Incus member: it was not admitted", st.Machine)}, nil
	}
	if err != nil {
		return changes.Verdict{}, err
	}
	mark, marked := member.Config[lifecycle.AdmissionKey]
	if !marked || id == 0 || lifecycle.MarkedAdmission(mark) != id {
		return changes.Verdict{Outcome: audit.Failed, Found: fmt.Sprintf("%s does not carry the mark of admission %d (its mark: %s): it was not admitted", st.Machine, id, apperr.Quote(mark))}, nil
	}
	if st.Action == MarkAction {
		return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("%s carries the mark of admission %d", st.Machine, id)}, nil
	}
	roles := member.Roles
	if r, ok := st.Details[AdmittedRolesDetail].([]any); ok {
		roles = make([]string, len(r))
		for i, v := range r {
			roles[i] = fmt.Sprint(v)
		}
	}
	if _, err := s.Store.RecordAdmission(ctx, Admitted{ID: id, Cluster: cl.ID, Machine: st.Machine, Member: member.Name, Roles: roles,
		Groups: append([]string{}, member.Groups...), FailureDomain: member.FailureDomain, By: st.Actor, RequestID: st.RequestID}); err != nil {
		return changes.Verdict{}, err
	}
	return changes.Verdict{Outcome: audit.Succeeded, Found: fmt.Sprintf("%s carries the mark of admission %d: the admission is recorded", st.Machine, id)}, nil
}

// detailID reads a record id from an event's details (a JSON number).
func detailID(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return 0
}
