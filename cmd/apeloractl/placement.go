package main

// The placement guard: its state, or turning it on or off.

import (
	"context"
	"fmt"

	"github.com/apelora/fabric/client"
)

// placement-guard without on or off prints the guard's state, which changes nothing (and
// so takes no -dry-run).
var placementGuardCommand = &command{
	name: "placement-guard", synopsis: "[on|off]",
	doc: "the placement guard's state, or turn it on or off: on,\nIncus places untargeted instances only on admitted members",
	run: (*cli).placementGuard,
	subs: []*command{
		{name: "on", mutation: "setPlacementGuard", run: func(c *cli, ctx context.Context, _ []string) error { return c.setPlacementGuard(ctx, true) }},
		{name: "off", mutation: "setPlacementGuard", run: func(c *cli, ctx context.Context, _ []string) error { return c.setPlacementGuard(ctx, false) }},
	},
}

func (c *cli) placementGuard(ctx context.Context, _ []string) error {
	r, err := client.PlacementGuard(ctx, c.gql)
	if err != nil {
		return err
	}
	g := r.Cluster.PlacementGuard
	if g == nil {
		return fmt.Errorf("the placement guard's state is unknown: Incus could not be asked; check APELORA_INCUS_URL on the server and that the cluster is up")
	}
	return c.printGuard(g.State, g.Message, g)
}

func (c *cli) setPlacementGuard(ctx context.Context, on bool) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.SetPlacementGuardResponse, planView, error) {
		r, err := client.SetPlacementGuard(ctx, c.gql, client.SetPlacementGuardInput{Enabled: on, DryRun: dryRun, PlanHash: planHash})
		return r, r.GetSetPlacementGuard().Plan, err
	}, func(r *client.SetPlacementGuardResponse) error {
		g := r.SetPlacementGuard.PlacementGuard
		if g == nil {
			return fmt.Errorf("the server answered without the placement guard's state")
		}
		return c.printGuard(g.State, g.Message, g)
	})
}

func (c *cli) printGuard(state client.PlacementGuardState, message string, v any) error {
	if c.json {
		return c.print(v, nil)
	}
	_, err := fmt.Fprintf(c.out, "placement guard %s: %s\n", state, message)
	return err
}
