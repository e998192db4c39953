package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/changes"
	"github.com/apelora/fabric/domain/enrolment"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/domain/rolling"
	"github.com/apelora/fabric/resolvers"
)

// The change reconciler runs in the API replicas (one leads at a time, role "changes"):
// they read Incus and MAAS (the worker's rolling steps too: MAAS's machine read says its
// power state), and a restarted API leads at once when none other does, so the steps it
// left without an outcome are found on its next start.

// reconcileEvery is how often the leading reconciler looks for steps without an outcome,
// at most (a shorter lease looks more often).
const reconcileEvery = 5 * time.Second

// judges are the rules that tell what became of each action's step: every action that
// sends a change to Incus or MAAS has one (TestEveryStepSentUpstreamHasAJudge).
func judges(res *resolvers.Resolver, store *postgres.Store) map[string]changes.Judge {
	maint := func(ctx context.Context, st changes.Step, action string) (changes.Verdict, error) {
		return res.Maintenance.JudgeStep(ctx, st, action)
	}
	var power func(ctx context.Context, systemID string) (string, error)
	if res.Provisioning.MAAS != nil {
		power = func(ctx context.Context, systemID string) (string, error) {
			m, err := res.Provisioning.MAAS.Machine(ctx, systemID)
			return m.PowerState, err
		}
	}
	return map[string]changes.Judge{
		"approveEnrolment":   res.Enrolment.JudgeStep,
		"revokeJoinToken":    res.Enrolment.JudgeStep,
		"removeMember":       res.Enrolment.JudgeStep,
		"admitMember":        res.Admission.JudgeStep,
		admission.MarkAction: res.Admission.JudgeStep,
		"evacuateMember": func(ctx context.Context, st changes.Step) (changes.Verdict, error) {
			return maint(ctx, st, maintenance.Evacuate)
		},
		"restoreMember": func(ctx context.Context, st changes.Step) (changes.Verdict, error) {
			return maint(ctx, st, maintenance.Restore)
		},
		"setPlacementGuard":      res.Placement.JudgeStep,
		"commissionMachine":      res.Provisioning.JudgeStep,
		"installOperatingSystem": res.Provisioning.JudgeStep,
		"runHardwareTests":       res.Provisioning.JudgeStep,
		"releaseMachine":         res.Provisioning.JudgeStep,
		rolling.StageAction:      rollingJudge(store, maint, power),
	}
}

// JudgedActions lists the actions whose steps the reconciler can judge, for tests that
// every action that sends a step to Incus or MAAS has a judge.
func JudgedActions() []string {
	res := &resolvers.Resolver{Enrolment: &enrolment.Service{}, Admission: &admission.Service{}, Maintenance: &maintenance.Service{},
		Placement: &placement.Service{}, Provisioning: &provisioning.Service{}}
	out := []string{}
	for a := range judges(res, nil) {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

func rollingJudge(store *postgres.Store, maint func(context.Context, changes.Step, string) (changes.Verdict, error), power func(context.Context, string) (string, error)) changes.Judge {
	j := rolling.StageJudge{Maintenance: maint, PowerState: power}
	if store != nil {
		j.Store = store.Rolling()
	}
	return j.Judge
}

// startReconciler runs the change reconciler on this replica until ctx ends.
func startReconciler(ctx context.Context, cfg Config, store *postgres.Store, res *resolvers.Resolver, log *slog.Logger) *changes.Reconciler {
	host, _ := os.Hostname()
	r := &changes.Reconciler{
		Store: store, Judges: judges(res, store),
		// The last call a stopped process had in flight has reached Incus or MAAS, or
		// never will, once its request timeout has passed.
		Grace:      cfg.upstreamTimeout(),
		Interval:   min(reconcileEvery, cfg.leaderLease()),
		Leadership: store.ChangesLeadership(fmt.Sprintf("apelora changes %s-%d", host, os.Getpid()), cfg.leaderLease()),
		Lease:      cfg.leaderLease(), Log: log,
	}
	go r.Run(ctx)
	return r
}
