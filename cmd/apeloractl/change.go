package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

// Every change command (a command with a mutation: commands.go) takes -dry-run and
// -plan-hash, and this is the one place that handles them: runCommand takes them out of
// the arguments (takeDryRun, takePlanHash) and refuses them to a command that changes
// nothing, and the command makes its call through change, which sets the input's dryRun
// and planHash and prints the plan of a dry run.

// change makes a change command's call. send sends its mutation with the input's dryRun
// and planHash as -dry-run and -plan-hash give them, and returns the answer and its plan.
// A dry run prints the plan, and a plan that would be refused returns its refusal, so the
// exit status is the call's; the change itself prints what done prints.
func change[R any](c *cli, send func(dryRun *bool, planHash *string) (R, planView, error), done func(R) error) error {
	return changeShowing(c, send, nil, done)
}

// changeShowing is change for a command whose dry run shows more than the plan (the
// instances an evacuation moves): show prints it first, for a dry run and the change
// alike, and says whether that was all (with -json it prints the whole answer).
func changeShowing[R any](c *cli, send func(dryRun *bool, planHash *string) (R, planView, error), show func(R) (bool, error), done func(R) error) error {
	r, plan, err := send(c.dry(), c.planHash)
	if err != nil {
		return err
	}
	if show != nil {
		if all, err := show(r); err != nil || all {
			return err
		}
	}
	if c.dryRun {
		return c.printPlan(plan)
	}
	return done(r)
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
	GetFacts() []client.PlanFieldsFactsPlanFact
	GetCalls() []client.PlanFieldsCallsPlanCall
	GetRefusals() []client.PlanFieldsRefusalsPlanFinding
	GetWarnings() []client.PlanFieldsWarningsPlanFinding
}

// printPlan prints a dry run's plan. A plan that would be refused returns its refusals,
// so the exit status is the call's.
func (c *cli) printPlan(p planView) error {
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
		// What it read that the change depends on (the hash covers it): a registration's
		// fingerprint, members and roles, an evacuation's instances.
		for _, f := range p.GetFacts() {
			fmt.Fprintf(w, "  read: %s: %s\n", f.Name, f.Value)
		}
		if len(p.GetCalls()) == 0 {
			fmt.Fprintln(w, "  no call: nothing would be changed")
		}
		for i, call := range p.GetCalls() {
			target := ""
			if call.Target != "" {
				target = "  on " + call.Target
			}
			fmt.Fprintf(w, "  %d.\t%s\t%s%s\n", i+1, call.System, call.Request, target)
			for _, ch := range call.Changes {
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
