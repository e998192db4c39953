package main

// The audit trail: a page of it, newest first, or its events as they are recorded.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/Khan/genqlient/graphql"

	"github.com/apelora/fabric/client"
)

var (
	auditCommand = &command{
		name: "audit", synopsis: "[-machine NAME] [-first N]", doc: "the audit trail, newest first",
		flags: func(fs *flag.FlagSet) runner {
			machine := fs.String("machine", "", "only events about this machine")
			first := fs.Int("first", 20, "how many events (1–500)")
			return func(c *cli, ctx context.Context, _ []string) error { return c.audit(ctx, *machine, first) }
		},
	}
	watchAuditCommand = &command{
		name: "watch-audit", synopsis: "[-machine NAME] [-after ID]",
		doc: "print audit events as they are recorded (after ID: those\nrecorded since that event first, none missed or repeated)",
		flags: func(fs *flag.FlagSet) runner {
			machine := fs.String("machine", "", "only events about this machine")
			after := fs.String("after", "", "first the events recorded after this event id (the first field of a line), then live ones")
			return func(c *cli, ctx context.Context, _ []string) error { return c.watchAudit(ctx, *machine, *after) }
		},
	}
)

func (c *cli) audit(ctx context.Context, machine string, first *int) error {
	var m *string
	if machine != "" {
		m = &machine
	}
	r, err := client.AuditEvents(ctx, c.gql, first, nil, m)
	if err != nil {
		return err
	}
	return c.print(r.AuditEvents, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ID\tTIME\tACTOR\tACTION\tMACHINE\tOUTCOME\tERROR")
		for _, e := range r.AuditEvents.Edges {
			n := e.Node
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Id, n.At.Local().Format(time.DateTime), n.Actor, n.Action, str(n.Machine), outcomeText(string(n.Outcome), n.Details), str(n.Error))
		}
	})
}

func (c *cli) watchAudit(ctx context.Context, machine, after string) error {
	var m, from *string
	if machine != "" {
		m = &machine
	}
	if after != "" {
		from = &after
	}
	return follow(ctx, c, func(ws graphql.WebSocketClient) (chan client.AuditEventRecordedWsResponse, error) {
		events, _, err := client.AuditEventRecorded(ctx, ws, m, from)
		return events, err
	}, func(ev client.AuditEventRecordedWsResponse) error {
		if ev.Errors != nil {
			return ev.Errors
		}
		n := ev.Data.AuditEventRecorded
		if c.json {
			return json.NewEncoder(c.out).Encode(n)
		}
		fmt.Fprintf(c.out, "%s %s %s %s %s %s %s\n", n.Id, n.At.Local().Format(time.DateTime), n.Actor, n.Action, str(n.Machine), outcomeText(string(n.Outcome), n.Details), str(n.Error))
		return nil
	})
}

// outcomeText is an event's outcome as apeloractl prints it: a step sent to Incus or MAAS
// has two events, its intent (STARTED, "the approved step") and its outcome, which names
// the intent's id; an outcome found after the process that sent the step stopped says so.
func outcomeText(outcome string, details map[string]any) string {
	switch {
	case outcome == "STARTED":
		return "STARTED (intent: sent to Incus or MAAS next)"
	case details["intent"] != nil && details["recordedBy"] == "reconciler":
		return fmt.Sprintf("%s (of intent %s, found after a restart)", outcome, eventID(details["intent"]))
	case details["intent"] != nil:
		return fmt.Sprintf("%s (of intent %s)", outcome, eventID(details["intent"]))
	}
	return outcome
}

// eventID prints an event id from an event's details (a JSON number).
func eventID(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatInt(int64(f), 10)
	}
	return fmt.Sprint(v)
}
