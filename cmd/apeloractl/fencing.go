package main

// Fencing: each member's fence mapping (the MAAS machine apelora-worker powers off when
// the member is dead), setting and removing one.

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

var (
	fenceMappingsCommand = &command{
		name: "fence-mappings", doc: "every fence mapping: member, MAAS machine, last drill",
		run: (*cli).fenceMappings,
	}
	setFenceMappingCommand = &command{
		name: "set-fence-mapping", synopsis: "MEMBER -maas-system-id ID -hardware-uuid UUID", names: 1,
		doc:      "map a member to the MAAS machine that powers it, so\napelora-worker may power it off when it is dead",
		mutation: "setFenceMapping",
		flags: func(fs *flag.FlagSet) runner {
			sysID := fs.String("maas-system-id", "", "the MAAS system id of the machine that runs the member")
			uuid := fs.String("hardware-uuid", "", "the machine's hardware UUID, as MAAS shows it")
			cluster := memberClusterFlag(fs)
			return func(c *cli, ctx context.Context, names []string) error {
				return c.setFenceMapping(ctx, client.SetFenceMappingInput{Member: names[0], Cluster: orNil(*cluster), MaasSystemId: *sysID, HardwareUuid: *uuid})
			}
		},
	}
	removeFenceMappingCommand = &command{
		name: "remove-fence-mapping", synopsis: "MEMBER", names: 1,
		doc:      "remove a member's fence mapping: it is never powered off",
		mutation: "removeFenceMapping",
		flags: func(fs *flag.FlagSet) runner {
			cluster := memberClusterFlag(fs)
			return func(c *cli, ctx context.Context, names []string) error {
				return c.removeFenceMapping(ctx, names[0], orNil(*cluster))
			}
		},
	}
)

func (c *cli) fenceMappings(ctx context.Context, _ []string) error {
	r, err := client.FenceMappings(ctx, c.gql)
	if err != nil {
		return err
	}
	// The fragment's fields, not genqlient's wrappers.
	ms := make([]client.FenceMappingFields, len(r.FenceMappings))
	for i := range r.FenceMappings {
		ms[i] = r.FenceMappings[i].FenceMappingFields
	}
	return c.print(ms, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "MEMBER\tMAAS SYSTEM ID\tHARDWARE UUID\tLAST DRILL\tSET")
		for _, m := range ms {
			drill := "not drilled yet"
			if d := m.LastDrill; d != nil && d.Ok {
				drill = "ready (" + when(&d.At) + ")"
			} else if d != nil {
				drill = "not ready: " + str(d.Problem) + " (" + when(&d.At) + ")"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s by %s\n", m.Member, m.MaasSystemId, m.HardwareUuid, drill, when(&m.SetAt), m.SetBy)
		}
	})
}

func (c *cli) setFenceMapping(ctx context.Context, in client.SetFenceMappingInput) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.SetFenceMappingResponse, planView, error) {
		in.DryRun, in.PlanHash = dryRun, planHash
		r, err := client.SetFenceMapping(ctx, c.gql, in)
		return r, r.GetSetFenceMapping().Plan, err
	}, func(r *client.SetFenceMappingResponse) error {
		p := r.SetFenceMapping
		if c.json {
			return c.print(p, nil)
		}
		fmt.Fprintf(c.out, "mapped member %s to MAAS machine %s (hardware UUID %s)", in.Member, in.MaasSystemId, in.HardwareUuid)
		if p.Previous != nil {
			fmt.Fprintf(c.out, ", replacing %s", p.Previous.MaasSystemId)
		}
		fmt.Fprintf(c.out, "\n%s\n", str(p.Notice))
		return nil
	})
}

func (c *cli) removeFenceMapping(ctx context.Context, member string, cluster *string) error {
	names := []string{member}
	return change(c, func(dryRun *bool, planHash *string) (*client.RemoveFenceMappingResponse, planView, error) {
		r, err := client.RemoveFenceMapping(ctx, c.gql, client.RemoveFenceMappingInput{Member: member, Cluster: cluster, DryRun: dryRun, PlanHash: planHash})
		return r, r.GetRemoveFenceMapping().Plan, err
	}, func(r *client.RemoveFenceMappingResponse) error {
		if c.json {
			return c.print(r.RemoveFenceMapping, nil)
		}
		fmt.Fprintf(c.out, "removed the fence mapping of %s: apelora-worker never powers it off until it has a new one\n", names[0])
		return nil
	})
}
