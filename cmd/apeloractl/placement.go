package main

import (
	"context"
	"fmt"

	"github.com/apelora/fabric/client"
)

// placementGuard runs `placement-guard [on|off]`: without an argument it prints the
// guard's state, which changes nothing (and so takes no -dry-run).
func (c *cli) placementGuard(ctx context.Context, args []string) error {
	const use = "apeloractl placement-guard [on|off] [-dry-run]"
	if len(args) > 1 {
		return usageError(use)
	}
	if len(args) == 0 {
		if c.dryRun {
			return usageError("placement-guard without on or off changes nothing: -dry-run is for on and off")
		}
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
	var on bool
	switch args[0] {
	case "on":
		on = true
	case "off":
	default:
		return usageError(use)
	}
	r, err := client.SetPlacementGuard(ctx, c.gql, client.SetPlacementGuardInput{Enabled: on, DryRun: c.dry(), PlanHash: c.planHash})
	if err != nil || c.dryRun {
		return c.planOr(err, r.GetSetPlacementGuard().Plan)
	}
	g := r.SetPlacementGuard.PlacementGuard
	if g == nil {
		return fmt.Errorf("the server answered without the placement guard's state")
	}
	return c.printGuard(g.State, g.Message, g)
}

func (c *cli) printGuard(state client.PlacementGuardState, message string, v any) error {
	if c.json {
		return c.print(v, nil)
	}
	_, err := fmt.Fprintf(c.out, "placement guard %s: %s\n", state, message)
	return err
}
