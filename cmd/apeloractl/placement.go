package main

// The placement guard: its state in each cluster, or turning it on or off in one.

import (
	"context"
	"flag"
	"fmt"

	"github.com/apelora/fabric/client"
)

// placement-guard without on or off prints the guard's state in each cluster (or the one
// -cluster names), which changes nothing (and so takes no -dry-run).
var placementGuardCommand = &command{
	name: "placement-guard", synopsis: "[on|off] [-cluster NAME]",
	doc: "the placement guard's state in each cluster, or turn it on\nor off in one: on, Incus places untargeted instances only\non admitted members",
	flags: func(fs *flag.FlagSet) runner {
		cluster := guardClusterFlag(fs)
		return func(c *cli, ctx context.Context, _ []string) error { return c.placementGuard(ctx, *cluster) }
	},
	subs: []*command{
		{name: "on", mutation: "setPlacementGuard", flags: func(fs *flag.FlagSet) runner {
			cluster := guardClusterFlag(fs)
			return func(c *cli, ctx context.Context, _ []string) error { return c.setPlacementGuard(ctx, true, *cluster) }
		}},
		{name: "off", mutation: "setPlacementGuard", flags: func(fs *flag.FlagSet) runner {
			cluster := guardClusterFlag(fs)
			return func(c *cli, ctx context.Context, _ []string) error { return c.setPlacementGuard(ctx, false, *cluster) }
		}},
	},
}

func guardClusterFlag(fs *flag.FlagSet) *string {
	return fs.String("cluster", "", "the cluster whose guard it is (a name 'apeloractl clusters' lists); default: the only cluster")
}

func (c *cli) placementGuard(ctx context.Context, cluster string) error {
	var names []string
	if cluster != "" {
		names = []string{cluster}
	}
	r, err := client.PlacementGuards(ctx, c.gql, names)
	if err != nil {
		return err
	}
	if c.json {
		return c.print(r.Clusters, nil)
	}
	for _, cl := range r.Clusters {
		g := cl.PlacementGuard
		if g == nil {
			fmt.Fprintf(c.out, "%s: placement guard unknown: Incus cluster %s could not be asked; check that it is up ('apeloractl clusters' shows how it is reached)\n", cl.Name, cl.Name)
			continue
		}
		fmt.Fprintf(c.out, "%s: placement guard %s: %s\n", cl.Name, g.State, g.Message)
	}
	return nil
}

func (c *cli) setPlacementGuard(ctx context.Context, on bool, cluster string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.SetPlacementGuardResponse, planView, error) {
		r, err := client.SetPlacementGuard(ctx, c.gql, client.SetPlacementGuardInput{Enabled: on, Cluster: orNil(cluster), DryRun: dryRun, PlanHash: planHash})
		return r, r.GetSetPlacementGuard().Plan, err
	}, func(r *client.SetPlacementGuardResponse) error {
		g := r.SetPlacementGuard.PlacementGuard
		if g == nil {
			return fmt.Errorf("the server answered without the placement guard's state")
		}
		if c.json {
			return c.print(g, nil)
		}
		_, err := fmt.Fprintf(c.out, "placement guard %s: %s\n", g.State, g.Message)
		return err
	})
}
