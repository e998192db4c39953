package main

// Maintenance: evacuate a member (Incus moves or stops its instances) and restore it.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

var (
	evacuateCommand = &command{
		name: "evacuate", synopsis: "NAME [-mode auto|migrate|live-migrate|stop] [-cluster NAME]", names: 1,
		doc:      "maintenance: Incus moves or stops every instance on the\nmember (each as its cluster.evacuate says, or -mode)",
		mutation: "evacuateMember",
		flags: func(fs *flag.FlagSet) runner {
			mode := fs.String("mode", "", "force this on every instance instead of its cluster.evacuate")
			cluster := memberClusterFlag(fs)
			return func(c *cli, ctx context.Context, names []string) error {
				return c.evacuate(ctx, names[0], *mode, *cluster)
			}
		},
	}
	restoreCommand = &command{
		name: "restore", synopsis: "NAME [-cluster NAME]", names: 1,
		doc:      "run the admission checks again, then Incus brings the\nmember's instances back",
		mutation: "restoreMember", flags: func(fs *flag.FlagSet) runner {
			cluster := memberClusterFlag(fs)
			return func(c *cli, ctx context.Context, names []string) error { return c.restore(ctx, names, *cluster) }
		},
	}
)

func (c *cli) evacuate(ctx context.Context, name, mode, cluster string) error {
	in := client.EvacuateMemberInput{Name: name, Cluster: orNil(cluster)}
	if mode != "" {
		m := client.EvacuationMode(strings.ReplaceAll(strings.ToUpper(mode), "-", "_"))
		in.Mode = &m
	}
	return changeShowing(c, func(dryRun *bool, planHash *string) (*client.EvacuateMemberResponse, planView, error) {
		in.DryRun, in.PlanHash = dryRun, planHash
		r, err := client.EvacuateMember(ctx, c.gql, in)
		return r, r.GetEvacuateMember().Plan, err
	}, func(r *client.EvacuateMemberResponse) (bool, error) {
		p := r.EvacuateMember
		if c.json {
			return true, c.print(p, nil)
		}
		ins := make([]client.MaintenanceInstanceFields, len(p.Instances))
		for i, in := range p.Instances {
			ins[i] = in.MaintenanceInstanceFields
		}
		c.printInstances(ins)
		for _, t := range p.Targets {
			fmt.Fprintf(c.out, "may land on %s (%d instances now)\n", t.Member, t.Instances)
		}
		return false, nil
	}, func(r *client.EvacuateMemberResponse) error {
		fmt.Fprintf(c.out, "evacuating %s (maintenance task %s, Incus operation %s); progress: subscription maintenanceTask(name: %q)\n", name, r.EvacuateMember.Task.Id, r.EvacuateMember.Task.IncusOperation, name)
		return nil
	})
}

func (c *cli) restore(ctx context.Context, names []string, cluster string) error {
	name := names[0]
	return changeShowing(c, func(dryRun *bool, planHash *string) (*client.RestoreMemberResponse, planView, error) {
		r, err := client.RestoreMember(ctx, c.gql, client.RestoreMemberInput{Name: name, Cluster: orNil(cluster), DryRun: dryRun, PlanHash: planHash})
		return r, r.GetRestoreMember().Plan, err
	}, func(r *client.RestoreMemberResponse) (bool, error) {
		p := r.RestoreMember
		if c.json {
			return true, c.print(p, nil)
		}
		if p.Report != nil {
			if err := c.printReport(&p.Report.AdmissionReportFields); err != nil {
				return false, err
			}
		}
		ins := make([]client.MaintenanceInstanceFields, len(p.Instances))
		for i, in := range p.Instances {
			ins[i] = in.MaintenanceInstanceFields
		}
		c.printInstances(ins)
		return false, nil
	}, func(r *client.RestoreMemberResponse) error {
		fmt.Fprintf(c.out, "restoring %s (maintenance task %s, Incus operation %s); progress: subscription maintenanceTask(name: %q)\n", name, r.RestoreMember.Task.Id, r.RestoreMember.Task.IncusOperation, name)
		return nil
	})
}

func (c *cli) printInstances(ins []client.MaintenanceInstanceFields) {
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "INSTANCE\tPROJECT\tSTATUS\tCLUSTER.EVACUATE\tFATE")
	for _, in := range ins {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", in.Name, in.Project, in.Status, str(in.ClusterEvacuate), in.Fate)
	}
	w.Flush()
}
