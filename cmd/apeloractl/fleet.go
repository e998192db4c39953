package main

// The fleet: every machine with its MAAS status and which sources answered, once or live.

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/Khan/genqlient/graphql"

	"github.com/apelora/fabric/client"
)

var (
	fleetCommand = &command{
		name: "fleet", doc: "every machine with its MAAS status, and which sources answered",
		run: (*cli).fleet,
	}
	watchFleetCommand = &command{
		name: "watch-fleet",
		doc:  "the fleet, then each change as it happens (fleetUpdates):\n\"+\" added, \"~\" changed, \"-\" removed, with the revision",
		run:  (*cli).watchFleet,
	}
)

func (c *cli) fleet(ctx context.Context, _ []string) error {
	r, err := client.Fleet(ctx, c.gql)
	if err != nil {
		return err
	}
	f := r.Fleet
	return c.print(f, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "NAME\tPHASE\tMEMBER\tMAAS\tSYSTEM ID\tPOWER\tTESTS\tWARNINGS")
		for _, m := range f.Machines {
			maasStatus, sysID, power, tests := "-", "-", "-", "-"
			if m.Maas != nil {
				maasStatus, sysID, power, tests = m.Maas.Status, m.Maas.SystemId, m.Maas.PowerState, m.Maas.TestingStatus
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Phase, memberStatus(m.Member), maasStatus, sysID, power, tests, warnings(m.Warnings))
		}
		for name, s := range map[string]client.SourceFields{"incus": f.Sources.Incus.SourceFields, "maas": f.Sources.Maas.SourceFields} {
			if !s.Available {
				fmt.Fprintf(w, "%s:\t%s\n", name, s.Message)
			}
		}
	})
}

func (c *cli) watchFleet(ctx context.Context, _ []string) error {
	var last *int // the last revision printed
	return follow(ctx, c, func(ws graphql.WebSocketClient) (chan client.FleetUpdatesWsResponse, error) {
		updates, _, err := client.FleetUpdates(ctx, ws, nil, nil)
		return updates, err
	}, func(ev client.FleetUpdatesWsResponse) error {
		if ev.Errors != nil {
			return ev.Errors
		}
		u := ev.Data.FleetUpdates
		if last != nil && !u.Snapshot && u.Revision != *last+1 {
			fmt.Fprintf(c.out, "revision %d follows %d: changes were missed\n", u.Revision, *last)
		}
		rev := u.Revision
		last = &rev
		if c.json {
			return json.NewEncoder(c.out).Encode(u)
		}
		if u.Snapshot {
			fmt.Fprintf(c.out, "revision %d: %d machines\n", u.Revision, len(u.Added))
		} else {
			fmt.Fprintf(c.out, "revision %d\n", u.Revision)
		}
		for _, m := range u.Added {
			fmt.Fprintf(c.out, "+ %s %s %s\n", m.Name, m.Phase, memberStatus(m.Member))
		}
		for _, m := range u.Changed {
			fmt.Fprintf(c.out, "~ %s %s %s\n", m.Name, m.Phase, memberStatus(m.Member))
		}
		for _, name := range u.Removed {
			fmt.Fprintf(c.out, "- %s\n", name)
		}
		if s := u.Sources; s != nil {
			fmt.Fprintf(c.out, "sources: incus %s, maas %s\n", s.Incus.Message, s.Maas.Message)
		}
		return nil
	})
}
