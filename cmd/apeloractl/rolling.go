package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

const rollingUsage = "apeloractl rolling-reboot start NAME [NAME ...] | pause ID | resume ID | cancel ID | status [ID]"

// rollingReboot starts, pauses, resumes, cancels or shows a rolling reboot; apelora-worker
// drives it, so every command returns at once (status shows where it stands).
func (c *cli) rollingReboot(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError(rollingUsage)
	}
	sub, rest := args[0], args[1:]
	var op *client.RollingRebootFields
	var plan planView
	var err error
	switch sub {
	case "start":
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return usageError(rollingUsage)
		}
		r, e := client.StartRollingReboot(ctx, c.gql, client.StartRollingRebootInput{Members: rest, DryRun: c.dry(), PlanHash: c.planHash})
		err = e
		if p := r.GetStartRollingReboot(); p.RollingReboot != nil {
			op = &p.RollingReboot.RollingRebootFields
		}
		plan = r.GetStartRollingReboot().Plan
	case "pause", "resume", "cancel":
		if len(rest) != 1 {
			return usageError(rollingUsage)
		}
		in := client.RollingRebootInput{Id: rest[0], DryRun: c.dry(), PlanHash: c.planHash}
		switch sub {
		case "pause":
			r, e := client.PauseRollingReboot(ctx, c.gql, in)
			err, plan = e, r.GetPauseRollingReboot().Plan
			if p := r.GetPauseRollingReboot(); p.RollingReboot != nil {
				op = &p.RollingReboot.RollingRebootFields
			}
		case "resume":
			r, e := client.ResumeRollingReboot(ctx, c.gql, in)
			err, plan = e, r.GetResumeRollingReboot().Plan
			if p := r.GetResumeRollingReboot(); p.RollingReboot != nil {
				op = &p.RollingReboot.RollingRebootFields
			}
		default:
			r, e := client.CancelRollingReboot(ctx, c.gql, in)
			err, plan = e, r.GetCancelRollingReboot().Plan
			if p := r.GetCancelRollingReboot(); p.RollingReboot != nil {
				op = &p.RollingReboot.RollingRebootFields
			}
		}
	case "status":
		if c.dryRun || c.planHash != nil {
			return usageError("rolling-reboot status changes nothing: -dry-run and -plan-hash are for start, pause, resume and cancel")
		}
		if len(rest) > 1 {
			return usageError(rollingUsage)
		}
		var id *string
		if len(rest) == 1 {
			id = &rest[0]
		}
		r, err := client.RollingReboot(ctx, c.gql, id)
		if err != nil {
			return err
		}
		if r.RollingReboot == nil {
			fmt.Fprintln(c.out, "no rolling reboot yet")
			return nil
		}
		return c.printRolling(&r.RollingReboot.RollingRebootFields)
	default:
		return usageError(rollingUsage)
	}
	if err != nil || c.dryRun {
		return c.planOr(err, plan)
	}
	return c.printRolling(op)
}

func (c *cli) printRolling(op *client.RollingRebootFields) error {
	if op == nil {
		return fmt.Errorf("the server answered no rolling reboot")
	}
	return c.print(op, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "rolling reboot:\t%s\n", op.Id)
		fmt.Fprintf(w, "state:\t%s\n", op.State)
		fmt.Fprintf(w, "members:\t%s (%d of %d done)\n", strings.Join(op.Members, ", "), op.Done, len(op.Members))
		if op.Current != nil {
			fmt.Fprintf(w, "current:\t%s, step %s for %.0f s\n", *op.Current, op.Step, op.StepSeconds)
		}
		if op.Reason != "" {
			fmt.Fprintf(w, "reason:\t%s\n", op.Reason)
		}
		fmt.Fprintf(w, "started:\t%s by %s\n", op.StartedAt.UTC().Format("2006-01-02 15:04:05Z"), op.StartedBy)
	})
}
