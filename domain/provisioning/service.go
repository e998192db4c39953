package provisioning

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/enrolment"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// Store is what the MAAS steps need from the database.
type Store interface {
	Audited(ctx context.Context, machine string, fn func(ctx context.Context) error) error
	Record(ctx context.Context, name string) (*machines.Record, error)
	RecordBySystemID(ctx context.Context, systemID string) (*machines.Record, error)
}

// Enrolment issues and withdraws join tokens inside a change already audited.
type Enrolment interface {
	// Prepare issues the join token in the cluster named cluster ("" for the record's).
	Prepare(ctx context.Context, rec *machines.Record, cluster string, overrides []enrolment.ConfigValue) (*enrolment.Approval, error)
	Withdraw(ctx context.Context, a *enrolment.Approval)
	// Joining ends the machine's admission and has its record name the token's cluster,
	// after the step's upstream calls; Joined does so for a step judged later, in the
	// cluster the step named.
	Joining(ctx context.Context, a *enrolment.Approval) error
	Joined(ctx context.Context, name, cluster string) error
}

// Service performs the MAAS steps.
type Service struct {
	MAAS        MAAS            // nil when MAAS is not configured
	ImageSource ImageSource     // likewise
	Hardware    HardwareDetails // likewise
	Store       Store
	Membership  membership.Source
	Enrolment   Enrolment
	EnrolScript []byte // enrol-member.sh, put in the cloud-init user data
}

func (s *Service) maas() (MAAS, error) {
	if s.MAAS == nil {
		return nil, apperr.NotConfigured(apperr.MAAS)
	}
	return s.MAAS, nil
}

func validateSystemID(id string) error { return machines.ValidateSystemID("systemId", id) }

// subject finds the machine record behind a system id, names the audit event after it,
// and returns the lock name for the change. A MAAS machine Apelora has no record of is
// refused: registering comes first (a discovered machine registers in any MAAS state), so
// that every step on a machine is in its history, under its name.
func (s *Service) subject(ctx context.Context, systemID string) (*machines.Record, string, error) {
	rec, err := s.Store.RecordBySystemID(ctx, systemID)
	if err != nil {
		return nil, "", err
	}
	if rec == nil {
		return nil, "", refused("%s", UnregisteredRefusal(systemID))
	}
	if a := audit.ActionFrom(ctx); a != nil {
		a.SetMachine(rec.Name)
	}
	return rec, rec.Name, nil
}

// refuseMember refuses a step that would disturb an Incus member: the machine registered
// from it, or (with no record, such as the bootstrap member) the member MAAS's hostname
// names.
func (s *Service) refuseMember(ctx context.Context, rec *machines.Record, cur MAASMachine, step string) error {
	if s.Membership == nil {
		return nil
	}
	snap, err := s.Membership.Snapshot(ctx)
	if err != nil {
		return err
	}
	names := []string{cur.Hostname}
	if rec != nil {
		names = append(names, rec.Name)
	}
	for _, n := range names {
		if n != "" && snap.Member(n) != nil {
			return refused("%s", memberRefusal(n, step))
		}
	}
	return nil
}

// readMachine is the MAAS machine as a step's plan reads it: the state the step is
// approved for (a machine that moved on since is another plan).
func readMachine(ctx context.Context, cur MAASMachine) error {
	if a := audit.ActionFrom(ctx); a != nil {
		// What the reconciler compares with if the step's outcome is ever lost.
		a.Detail("systemId", cur.SystemID)
		a.Detail("maasStatus", cur.StatusName)
	}
	return plan.Read(ctx, "MAAS machine "+cur.SystemID, fmt.Sprintf("%s, status %s", cur.Hostname, cur.StatusName))
}

// sortedSet is a set of names (the tests to run) in one order: the input is a set, so
// the request and its plan do not depend on the order it was given in.
func sortedSet(names []string) []string {
	if names == nil {
		return nil
	}
	out := slices.Clone(names)
	slices.Sort(out)
	return out
}

// Commission has MAAS commission a machine, with the tests asked for.
func (s *Service) Commission(ctx context.Context, systemID string, o CommissionOptions) (*MAASMachine, error) {
	m, err := s.maas()
	if err != nil {
		return nil, err
	}
	if err := validateSystemID(systemID); err != nil {
		return nil, err
	}
	if err := ValidateTests("tests", o.Tests); err != nil {
		return nil, err
	}
	rec, lock, err := s.subject(ctx, systemID)
	if err != nil {
		return nil, err
	}
	var out MAASMachine
	err = s.Store.Audited(ctx, lock, func(ctx context.Context) error {
		cur, err := m.Machine(ctx, systemID)
		if err != nil {
			return err
		}
		if err := readMachine(ctx, cur); err != nil {
			return err
		}
		if err := s.refuseMember(ctx, rec, cur, "commissioning"); err != nil {
			return err
		}
		if why := commissionRefusal(cur); why != "" {
			return refused("%s", why)
		}
		o.Tests = sortedSet(o.Tests)
		out, err = m.Commission(ctx, systemID, o)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Install has MAAS install an operating system on a registered MAAS machine and enrol it:
// Incus issues a join token, which goes only into the cloud-init user data of the deploy
// call (never stored, logged or audited; the audit event records the series). A Ready
// machine is allocated first. If the deploy fails, the token is revoked and an allocation
// made here is released, so nothing is left half-done. The token comes from the cluster
// named cluster ("" for the record's, or the environment's), which the machine joins
// through cloud-init and its record names afterwards; naming another cluster than the
// record's moves a machine that is not enrolled in it (enrolment.Service.Prepare).
func (s *Service) Install(ctx context.Context, name, series, cluster string, overrides []enrolment.ConfigValue) (*MAASMachine, error) {
	m, err := s.maas()
	if err != nil {
		return nil, err
	}
	if err := ValidateSeries(series); err != nil {
		return nil, err
	}
	rec, err := machines.Registered(ctx, s.Store, name, "register it from MAAS first (registerMachine with provisioner MAAS)")
	if err != nil {
		return nil, err
	}
	if rec.Provisioner != machines.MAAS {
		return nil, refused("%s", installRefusal(rec, MAASMachine{}))
	}
	var out MAASMachine
	err = s.Store.Audited(ctx, name, func(ctx context.Context) error {
		// Read again under the machine's lock: it may have been unregistered meanwhile.
		if rec, err = machines.Registered(ctx, s.Store, name, "it was unregistered meanwhile"); err != nil {
			return err
		}
		cur, err := m.Machine(ctx, rec.MAASSystemID)
		if err != nil {
			return err
		}
		if err := readMachine(ctx, cur); err != nil {
			return err
		}
		if why := installRefusal(rec, cur); why != "" {
			return refused("%s", why)
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("systemId", cur.SystemID)
			a.Detail("series", series)
		}
		approval, err := s.Enrolment.Prepare(ctx, rec, cluster, overrides)
		if err != nil {
			return err
		}
		// If what follows fails, no token issued here stays usable (withdrawn inside the
		// change, so its intent covers it); a dry run's token was issued by nobody.
		withdraw := func() {
			s.Enrolment.Withdraw(ctx, approval)
		}
		userData, err := enrolment.UserData(s.EnrolScript, approval)
		if err != nil {
			withdraw()
			return err
		}
		shown, err := enrolment.ShownUserData(s.EnrolScript, approval)
		if err != nil {
			withdraw()
			return err
		}
		allocated := false
		if cur.Status == Ready {
			if _, err := m.Allocate(ctx, cur.SystemID); err != nil {
				withdraw()
				return err
			}
			allocated = true
		}
		out, err = m.Deploy(ctx, cur.SystemID, series, UserData{Bytes: userData, Shown: shown})
		clear(userData)
		if err != nil {
			if allocated {
				// Give back what this step took, leaving MAAS as it found the machine.
				if _, rerr := m.Release(context.WithoutCancel(ctx), cur.SystemID, false, "Apelora: install failed, allocation returned"); rerr != nil {
					err = errors.Join(err, rerr)
				}
			}
			withdraw()
			return err
		}
		// A new join begins: the machine's old admission ends and its record names the
		// cluster it joins (after the upstream calls).
		return s.Enrolment.Joining(ctx, approval)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// RunTests has MAAS run hardware tests on a machine that is Ready, Broken or Failed
// testing. The administrator types the hostname again, so a slip of the system id cannot
// test the wrong machine.
func (s *Service) RunTests(ctx context.Context, systemID, hostname string, tests []string) (*MAASMachine, error) {
	m, err := s.maas()
	if err != nil {
		return nil, err
	}
	if err := validateSystemID(systemID); err != nil {
		return nil, err
	}
	if err := ValidateTests("tests", tests); err != nil {
		return nil, err
	}
	if strings.TrimSpace(hostname) == "" {
		return nil, invalid("hostname", "type the machine's hostname, as MAAS shows it, to confirm which machine to test")
	}
	_, lock, err := s.subject(ctx, systemID)
	if err != nil {
		return nil, err
	}
	var out MAASMachine
	err = s.Store.Audited(ctx, lock, func(ctx context.Context) error {
		cur, err := m.Machine(ctx, systemID)
		if err != nil {
			return err
		}
		if err := readMachine(ctx, cur); err != nil {
			return err
		}
		if !sameHostname(cur.Hostname, hostname) {
			return invalid("hostname", "%s is not the hostname of MAAS machine %s: type its hostname again, exactly as MAAS shows it", apperr.Quote(hostname), systemID)
		}
		if why := testRefusal(cur); why != "" {
			return refused("%s", why)
		}
		out, err = m.Test(ctx, systemID, sortedSet(tests))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ErasePreview says whether releasing erases the disks, before it happens.
type ErasePreview struct {
	Requested bool
	// MAASErases is MAAS's enable_disk_erasing_on_release: when on, MAAS erases whatever
	// the request says. Nil when it could not be read (the key may lack the right).
	MAASErases *bool
	Message    string
}

// Effective is whether the disks will be erased, or nil when unknown.
func (p ErasePreview) Effective() *bool {
	if p.Requested {
		t := true
		return &t
	}
	return p.MAASErases
}

// PreviewRelease tells what releasing would do to the disks.
func (s *Service) PreviewRelease(ctx context.Context, erase bool) (ErasePreview, error) {
	m, err := s.maas()
	if err != nil {
		return ErasePreview{}, err
	}
	p := ErasePreview{Requested: erase}
	on, err := m.EraseOnRelease(ctx)
	switch {
	case err != nil:
		if erase {
			p.Message = "the disks will be erased (asked for)"
		} else {
			p.Message = "MAAS's enable_disk_erasing_on_release could not be read, so MAAS may erase the disks anyway: " + apperr.Text(err)
		}
	case on:
		p.MAASErases = &on
		if erase {
			p.Message = "the disks will be erased (asked for; MAAS's enable_disk_erasing_on_release is on too)"
		} else {
			p.Message = "MAAS will erase the disks anyway: its enable_disk_erasing_on_release setting is on"
		}
	default:
		p.MAASErases = &on
		if erase {
			p.Message = "the disks will be erased (asked for)"
		} else {
			p.Message = "the disks will not be erased"
		}
	}
	return p, nil
}

// Release has MAAS release a machine. Erasing is off unless asked for, needs the
// hardware.delete permission as well, and never uses secure or quick erase (MAAS's own
// default may be secure erase: Apelora always sends both as false).
func (s *Service) Release(ctx context.Context, systemID string, erase bool, comment string) (*MAASMachine, ErasePreview, error) {
	m, err := s.maas()
	if err != nil {
		return nil, ErasePreview{}, err
	}
	mayErase := true
	// Erasing needs hardware.delete where the machine is: unscoped, or in its record's
	// cluster (identity.HasIn); asked before anything else, as a refusal for permission is.
	eraseRefusal := func(rec *machines.Record) error {
		id := identity.FromContext(ctx)
		if rec == nil || rec.Cluster == nil {
			return id.Require(identity.HardwareDelete)
		}
		// The gate let the call through only where the caller may manage: its grants
		// there name the cluster.
		name := fmt.Sprintf("the cluster of id %d", *rec.Cluster)
		for _, g := range id.Grants {
			if g.Cluster == *rec.Cluster {
				name = g.ClusterName
			}
		}
		return id.RequireIn(identity.HardwareDelete, identity.Where{Cluster: *rec.Cluster, Name: name, Why: rec.Name + " is in " + name})
	}
	refuseErase := func(err error) error {
		// A plan goes on, so it shows the refusal beside everything else.
		r := plan.From(ctx)
		if r == nil {
			return err
		}
		r.Refuse(err)
		mayErase = false
		return nil
	}
	scopedErase := erase && !identity.FromContext(ctx).Has(identity.HardwareDelete) && len(identity.FromContext(ctx).Scoped(time.Now())) > 0
	if erase && !scopedErase {
		if err := eraseRefusal(nil); err != nil {
			if err := refuseErase(err); err != nil {
				return nil, ErasePreview{}, err
			}
		}
	}
	if err := validateSystemID(systemID); err != nil {
		return nil, ErasePreview{}, err
	}
	if len(comment) > 500 || strings.ContainsAny(comment, "\x00\r\n") {
		return nil, ErasePreview{}, invalid("comment", "a comment is one line of at most 500 characters")
	}
	rec, lock, err := s.subject(ctx, systemID)
	if err != nil {
		return nil, ErasePreview{}, err
	}
	if scopedErase {
		if err := eraseRefusal(rec); err != nil {
			if err := refuseErase(err); err != nil {
				return nil, ErasePreview{}, err
			}
		}
	}
	preview, err := s.PreviewRelease(ctx, erase)
	if err != nil {
		return nil, ErasePreview{}, err
	}
	if r := plan.From(ctx); r != nil && mayErase {
		// What happens to the disks, erased or not, is what a release plan is read for
		// (for a caller who may not erase, the refusal says it all).
		r.Warn("", "%s", preview.Message)
	}
	var out MAASMachine
	err = s.Store.Audited(ctx, lock, func(ctx context.Context) error {
		cur, err := m.Machine(ctx, systemID)
		if err != nil {
			return err
		}
		if err := readMachine(ctx, cur); err != nil {
			return err
		}
		if err := s.refuseMember(ctx, rec, cur, "releasing it"); err != nil {
			return err
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("eraseRequested", erase)
			if eff := preview.Effective(); eff != nil {
				a.Detail("eraseEffective", *eff)
			} else {
				a.Detail("eraseEffective", "unknown")
			}
		}
		out, err = m.Release(ctx, systemID, erase, comment)
		return err
	})
	if err != nil {
		return nil, preview, err
	}
	return &out, preview, nil
}

// JudgeStep says what became of a MAAS step whose outcome its process did not record
// (package changes), from the machine's status in MAAS now against the one the step saw
// (details maasStatus), and records the database facts of that outcome (the admission an
// install ends).
func (s *Service) JudgeStep(ctx context.Context, st changes.Step) (changes.Verdict, error) {
	m, err := s.maas()
	if err != nil {
		return changes.Verdict{}, err
	}
	id := st.Text("systemId")
	if id == "" {
		return changes.Verdict{Outcome: audit.Failed, Found: "the step did not say which MAAS machine it was sent to: look at the machine in MAAS"}, nil
	}
	cur, err := m.Machine(ctx, id)
	if err != nil {
		return changes.Verdict{}, err
	}
	before, _ := st.Details["maasStatus"].(string)
	now := fmt.Sprintf("MAAS shows %s (%s) %s", id, cur.Hostname, cur.StatusName)
	if before != "" {
		now += ", it was " + before
	}
	happened := func(ok bool, what string) (changes.Verdict, error) {
		if ok {
			return changes.Verdict{Outcome: audit.Succeeded, Found: now + ": " + what + " happened"}, nil
		}
		return changes.Verdict{Outcome: audit.Failed, Found: now + ": " + what + " did not happen"}, nil
	}
	moved := cur.StatusName != before
	switch st.Action {
	case "commissionMachine":
		return happened(cur.Status == Commissioning || cur.Status == Testing || moved, "commissioning")
	case "runHardwareTests":
		return happened(cur.Status == Testing || moved, "the hardware tests")
	case "releaseMachine":
		return happened(cur.Status != Deployed && cur.Status != Allocated && cur.Status != Deploying && (moved || cur.Status == Ready), "the release")
	case "installOperatingSystem":
		switch cur.Status {
		case Deploying, Deployed:
			if err := s.Enrolment.Joined(ctx, st.Machine, st.Text("cluster")); err != nil {
				return changes.Verdict{}, err
			}
			return happened(true, "the install")
		case Allocated:
			return changes.Verdict{Outcome: audit.Failed, Found: now + ": allocated but never deployed; release it (releaseMachine), and revoke a pending join token (revokeJoinToken), before installing again"}, nil
		}
		return changes.Verdict{Outcome: audit.Failed, Found: now + ": the install did not happen; revoke a pending join token (revokeJoinToken) before installing again"}, nil
	}
	return changes.Verdict{}, apperr.New(apperr.Internal, "provisioning judges no %s step", st.Action)
}
