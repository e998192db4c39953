package admission

import (
	"context"
	"maps"

	"github.com/apelora/fabric/apperr"
	"github.com/apelora/fabric/audit"
	"github.com/apelora/fabric/lifecycle"
	"github.com/apelora/fabric/machines"
	"github.com/apelora/fabric/membership"
	"github.com/apelora/fabric/plan"
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
	// LatestStep returns the machine's latest successful step among steps in the audit
	// trail, "" for none.
	LatestStep(ctx context.Context, name string, steps []string) (string, error)
}

// AdmittedRolesDetail is the admission audit event's detail that lists the member's roles
// as Incus listed them when it was admitted.
const AdmittedRolesDetail = "roles"

// Service runs reports and admits members.
type Service struct {
	Checker *Checker
	Members Members
	Store   Store
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
// reach the member: one member update that removes scheduler.instance and sends back
// roles, groups, failure domain and description unchanged, guarded by the ETag read
// before the checks. The check results go into the audit event either way.
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
		member, etag, err := s.Members.Member(ctx, name)
		if err != nil {
			return err
		}
		if !member.Held() {
			latest, err := s.Store.LatestStep(ctx, name, lifecycle.MembershipSteps)
			if err != nil {
				return err
			}
			if lifecycle.Admits(latest) {
				return apperr.New(apperr.FailedPrecondition, "%s is already admitted: placement reaches it", apperr.Quote(name))
			}
		}
		report, err = s.Checker.Run(ctx, name, rec, TriggerAdmission)
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
				Message: "admission refused: " + failedSummary(failed),
				Details: map[string]any{"failedChecks": names, "runId": report.RunID},
			}
		}
		if member.Held() {
			release := member
			release.Config = maps.Clone(member.Config)
			delete(release.Config, membership.SchedulerKey)
			if err := s.Members.UpdateMember(ctx, release, etag); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return report, err
	}
	return report, nil
}

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
