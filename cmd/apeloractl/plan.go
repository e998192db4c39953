package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/internal/mutations"
)

// mutationOf is the mutation each command that changes something calls. Whether a
// command takes -dry-run comes from that mutation's declaration (internal/mutations,
// generated from schema/): every declared mutation is a change that can be planned.
var mutationOf = map[string]string{
	"register": "registerMachine", "unregister": "unregisterMachine",
	"approve": "approveEnrolment", "revoke": "revokeJoinToken", "admit": "admitMember", "remove": "removeMember",
	"evacuate": "evacuateMember", "restore": "restoreMember",
	// rolling-reboot start|pause|resume|cancel: the command is its first word; status refuses -dry-run itself.
	"rolling-reboot": "startRollingReboot", "rolling-reboot pause": "pauseRollingReboot",
	"rolling-reboot resume": "resumeRollingReboot", "rolling-reboot cancel": "cancelRollingReboot",
	"commission": "commissionMachine", "install": "installOperatingSystem",
	"hardware-test": "runHardwareTests", "release": "releaseMachine",
	"create-identity": "createIdentity", "revoke-identity": "revokeIdentity",
	"placement-guard": "setPlacementGuard", // on|off; its read without an argument refuses -dry-run itself
}

// changing reports whether cmd calls a declared change: it takes -dry-run.
func changing(cmd string) bool {
	_, ok := mutations.Of(mutationOf[cmd])
	return ok
}

// takeDryRun removes -dry-run (or --dry-run) from a command's arguments, wherever it is.
func takeDryRun(args []string) ([]string, bool) {
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "-dry-run" || a == "--dry-run" })
	return out, len(out) != len(args)
}

// takePlanHash removes -plan-hash HASH from a command's arguments and returns HASH.
func takePlanHash(args []string) ([]string, *string, error) {
	for i, a := range args {
		if a != "-plan-hash" && a != "--plan-hash" {
			continue
		}
		if i+1 >= len(args) || !strings.HasPrefix(args[i+1], "sha256:") {
			return nil, nil, usageError("-plan-hash takes the hash a -dry-run printed (sha256:…)")
		}
		h := args[i+1]
		return append(slices.Clone(args[:i]), args[i+2:]...), &h, nil
	}
	return args, nil, nil
}

// dry is the input's dryRun: set only with -dry-run.
func (c *cli) dry() *bool {
	if !c.dryRun {
		return nil
	}
	t := true
	return &t
}

// planView is every operation's plan: each embeds client.PlanFields.
type planView interface {
	GetRefused() bool
	GetPlanHash() string
	GetSteps() []client.PlanFieldsStepsPlanStep
	GetRefusals() []client.PlanFieldsRefusalsPlanFinding
	GetWarnings() []client.PlanFieldsWarningsPlanFinding
}

// planOr prints a dry run's plan; err (invalid input, the API unreachable) comes first.
// A plan that would be refused returns its refusals, so the exit status is the call's.
func (c *cli) planOr(err error, p planView) error {
	if err != nil {
		return err
	}
	if p == nil || reflect.ValueOf(p).IsNil() {
		return fmt.Errorf("the server answered no plan for -dry-run: is it older than this apeloractl?")
	}
	if c.json {
		if err := c.print(p, nil); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "plan (nothing was changed):")
		if len(p.GetSteps()) == 0 {
			fmt.Fprintln(w, "  no step")
		}
		for i, s := range p.GetSteps() {
			target := ""
			if s.Target != "" {
				target = "  on " + s.Target
			}
			fmt.Fprintf(w, "  %d.\t%s\t%s%s\n", i+1, s.System, s.Call, target)
			for _, ch := range s.Changes {
				switch {
				case ch.Before == nil:
					fmt.Fprintf(w, "\t\t  %s: %s\n", ch.Field, orNone(ch.After, "(none)"))
				default:
					fmt.Fprintf(w, "\t\t  %s: %s → %s\n", ch.Field, *ch.Before, orNone(ch.After, "(removed)"))
				}
			}
		}
		for _, f := range p.GetWarnings() {
			fmt.Fprintf(w, "warning: %s\n", f.Message)
		}
		for _, f := range p.GetRefusals() {
			fmt.Fprintf(w, "would be refused: %s: %s\n", orNone(f.Code, "REFUSED"), f.Message)
		}
		if !p.GetRefused() {
			fmt.Fprintf(w, "to make this change only while its plan is this one: the same command with -plan-hash %s\n", p.GetPlanHash())
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if !p.GetRefused() {
		return nil
	}
	api := &apiError{}
	for _, f := range p.GetRefusals() {
		api.errs = append(api.errs, codedMessage{orNone(f.Code, "FAILED_PRECONDITION"), strings.TrimSpace(f.Message)})
	}
	return api
}

func orNone(s *string, none string) string {
	if s == nil {
		return none
	}
	return *s
}
