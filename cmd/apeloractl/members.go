package main

// Members: their admission checks (once, or live), admitting one, removing one.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Khan/genqlient/graphql"

	"github.com/apelora/fabric/admission"
	"github.com/apelora/fabric/client"
)

func (c *cli) report(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageError("apeloractl report NAME")
	}
	r, err := client.AdmissionReport(ctx, c.gql, args[0])
	if err != nil {
		return err
	}
	return c.printReport(&r.AdmissionReport.AdmissionReportFields)
}

func (c *cli) admit(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageError("apeloractl admit NAME")
	}
	r, err := client.AdmitMember(ctx, c.gql, client.AdmitMemberInput{Name: args[0], DryRun: c.dry(), PlanHash: c.planHash})
	if err != nil || c.dryRun {
		return c.planOr(err, r.GetAdmitMember().Plan)
	}
	if err := c.printReport(&r.AdmitMember.Report.AdmissionReportFields); err != nil {
		return err
	}
	if !c.json {
		fmt.Fprintf(c.out, "admitted %s: automatic placement reaches it now\n", args[0])
	}
	return nil
}

func (c *cli) remove(ctx context.Context, args []string) error {
	const use = "apeloractl remove NAME [-force]"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError(use)
	}
	fs := newFlags("remove")
	force := fs.Bool("force", false, "drop the member without telling it (wipe its daemon afterwards)")
	if err := parseFlags(fs, args[1:], use); err != nil {
		return err
	}
	r, err := client.RemoveMember(ctx, c.gql, client.RemoveMemberInput{Name: args[0], Force: force, DryRun: c.dry(), PlanHash: c.planHash})
	if err != nil || c.dryRun {
		return c.planOr(err, r.GetRemoveMember().Plan)
	}
	fmt.Fprintf(c.out, "removed member %s from the cluster\n", args[0])
	return nil
}

func (c *cli) printReport(r *client.AdmissionReportFields) error {
	return c.print(r, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "CHECK\tRESULT\tMESSAGE")
		for _, ch := range r.Checks {
			fmt.Fprintf(w, "%s\t%s\t%s\n", ch.Name, ch.Result, ch.Message)
		}
		fmt.Fprintf(w, "verdict:\t%s\t\n", r.Verdict)
		if r.Verdict == client.AdmissionVerdictBlocked {
			var failed []admission.Check
			for _, ch := range r.Checks {
				if ch.Result == client.CheckResultFail {
					failed = append(failed, admission.Check{Title: ch.Title, Message: ch.Message})
				}
			}
			// The words admit's refusal (and admit -dry-run) and the console use.
			fmt.Fprintln(w, admission.BlockedBy(failed))
		}
	})
}

func (c *cli) watchAdmission(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageError("apeloractl watch-admission NAME")
	}
	return follow(ctx, c, func(ws graphql.WebSocketClient) (chan client.AdmissionChecksWsResponse, error) {
		events, _, err := client.AdmissionChecks(ctx, ws, args[0])
		return events, err
	}, func(ev client.AdmissionChecksWsResponse) error {
		if ev.Errors != nil {
			return ev.Errors
		}
		e := ev.Data.AdmissionChecks
		if c.json {
			return json.NewEncoder(c.out).Encode(e)
		}
		for _, ch := range e.Checks {
			fmt.Fprintf(c.out, "%s %s %s: %s %s\n", e.At.Local().Format(time.TimeOnly), e.RunId, ch.Name, ch.Result, ch.Message)
		}
		if e.Verdict != nil {
			fmt.Fprintf(c.out, "%s %s verdict: %s\n", e.At.Local().Format(time.TimeOnly), e.RunId, *e.Verdict)
		}
		return nil
	})
}
