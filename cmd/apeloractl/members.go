package main

// Members: their admission checks (once, or live), admitting one, removing one.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/Khan/genqlient/graphql"

	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/admission"
)

var (
	reportCommand = &command{
		name: "report", synopsis: "NAME", doc: "run the admission checks (changes nothing)", names: 1,
		run: (*cli).report,
	}
	admitCommand = &command{
		name: "admit", synopsis: "NAME", doc: "run the checks and admit the member if none fails", names: 1,
		mutation: "admitMember", run: (*cli).admit,
	}
	removeCommand = &command{
		name: "remove", synopsis: "NAME [-force]", doc: "remove the member from the cluster", names: 1,
		mutation: "removeMember",
		flags: func(fs *flag.FlagSet) runner {
			force := fs.Bool("force", false, "drop the member without telling it (wipe its daemon afterwards)")
			return func(c *cli, ctx context.Context, names []string) error { return c.remove(ctx, names[0], *force) }
		},
	}
	watchAdmissionCommand = &command{
		name: "watch-admission", synopsis: "NAME", doc: "print admission check results as they are computed", names: 1,
		run: (*cli).watchAdmission,
	}
)

func (c *cli) report(ctx context.Context, names []string) error {
	r, err := client.AdmissionReport(ctx, c.gql, names[0])
	if err != nil {
		return err
	}
	return c.printReport(&r.AdmissionReport.AdmissionReportFields)
}

func (c *cli) admit(ctx context.Context, names []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.AdmitMemberResponse, planView, error) {
		r, err := client.AdmitMember(ctx, c.gql, client.AdmitMemberInput{Name: names[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetAdmitMember().Plan, err
	}, func(r *client.AdmitMemberResponse) error {
		if err := c.printReport(&r.AdmitMember.Report.AdmissionReportFields); err != nil {
			return err
		}
		if !c.json {
			fmt.Fprintf(c.out, "admitted %s: automatic placement reaches it now\n", names[0])
		}
		return nil
	})
}

func (c *cli) remove(ctx context.Context, name string, force bool) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.RemoveMemberResponse, planView, error) {
		r, err := client.RemoveMember(ctx, c.gql, client.RemoveMemberInput{Name: name, Force: &force, DryRun: dryRun, PlanHash: planHash})
		return r, r.GetRemoveMember().Plan, err
	}, func(*client.RemoveMemberResponse) error {
		fmt.Fprintf(c.out, "removed member %s from the cluster\n", name)
		return nil
	})
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
