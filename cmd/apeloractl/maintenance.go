package main

// Maintenance: evacuate a member (Incus moves or stops its instances) and restore it.

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

func (c *cli) evacuate(ctx context.Context, args []string) error {
	const use = "apeloractl evacuate NAME [-mode auto|migrate|live-migrate|stop]"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError(use)
	}
	fs := newFlags("evacuate")
	mode := fs.String("mode", "", "force this on every instance instead of its cluster.evacuate")
	if err := parseFlags(fs, args[1:], use); err != nil {
		return err
	}
	in := client.EvacuateMemberInput{Name: args[0], DryRun: c.dry(), PlanHash: c.planHash}
	if *mode != "" {
		m := client.EvacuationMode(strings.ReplaceAll(strings.ToUpper(*mode), "-", "_"))
		in.Mode = &m
	}
	r, err := client.EvacuateMember(ctx, c.gql, in)
	if err != nil {
		return c.planOr(err, r.GetEvacuateMember().Plan)
	}
	p := r.EvacuateMember
	if c.json {
		return c.print(p, nil)
	}
	ins := make([]client.MaintenanceInstanceFields, len(p.Instances))
	for i, in := range p.Instances {
		ins[i] = in.MaintenanceInstanceFields
	}
	c.printInstances(ins)
	for _, t := range p.Targets {
		fmt.Fprintf(c.out, "may land on %s (%d instances now)\n", t.Member, t.Instances)
	}
	if c.dryRun {
		return c.planOr(nil, p.Plan)
	}
	fmt.Fprintf(c.out, "evacuating %s (Incus operation %s); progress: subscription memberOperation(name: %q)\n", args[0], p.Operation.IncusOperation, args[0])
	return nil
}

func (c *cli) restore(ctx context.Context, args []string) error {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		return usageError("apeloractl restore NAME")
	}
	r, err := client.RestoreMember(ctx, c.gql, client.RestoreMemberInput{Name: args[0], DryRun: c.dry(), PlanHash: c.planHash})
	if err != nil {
		return c.planOr(err, r.GetRestoreMember().Plan)
	}
	p := r.RestoreMember
	if c.json {
		return c.print(p, nil)
	}
	if p.Report != nil {
		if err := c.printReport(&p.Report.AdmissionReportFields); err != nil {
			return err
		}
	}
	ins := make([]client.MaintenanceInstanceFields, len(p.Instances))
	for i, in := range p.Instances {
		ins[i] = in.MaintenanceInstanceFields
	}
	c.printInstances(ins)
	if c.dryRun {
		return c.planOr(nil, p.Plan)
	}
	fmt.Fprintf(c.out, "restoring %s (Incus operation %s); progress: subscription memberOperation(name: %q)\n", args[0], p.Operation.IncusOperation, args[0])
	return nil
}

func (c *cli) printInstances(ins []client.MaintenanceInstanceFields) {
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "INSTANCE\tPROJECT\tSTATUS\tCLUSTER.EVACUATE\tFATE")
	for _, in := range ins {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", in.Name, in.Project, in.Status, str(in.ClusterEvacuate), in.Fate)
	}
	w.Flush()
}
