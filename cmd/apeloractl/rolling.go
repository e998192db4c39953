package main

// Rolling reboots: start one, pause, resume or cancel it, or show where it stands.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

// A rolling reboot is started, paused, resumed, cancelled or shown; apelora-worker drives
// it, so every command returns at once (status shows where it stands).
var rollingRebootCommand = &command{
	name: "rolling-reboot", synopsis: "start NAME [NAME ...] | pause ID | resume ID | cancel ID | status [ID]",
	doc: "reboot members one at a time through MAAS (evacuate,\npower cycle, wait until Incus lists it, checks, restore);\napelora-worker drives it, status shows where it stands;\n-cluster NAME on start and status: one cluster's",
	subs: []*command{
		{name: "start", names: 1, more: -1, mutation: "startRollingReboot", flags: func(fs *flag.FlagSet) runner {
			cluster := memberClusterFlag(fs)
			return func(c *cli, ctx context.Context, members []string) error {
				return c.startRollingReboot(ctx, members, *cluster)
			}
		}},
		{name: "pause", names: 1, mutation: "pauseRollingReboot", run: (*cli).pauseRollingReboot},
		{name: "resume", names: 1, mutation: "resumeRollingReboot", run: (*cli).resumeRollingReboot},
		{name: "cancel", names: 1, mutation: "cancelRollingReboot", run: (*cli).cancelRollingReboot},
		{name: "status", more: 1, flags: func(fs *flag.FlagSet) runner {
			cluster := fs.String("cluster", "", "the latest of this cluster (a name 'apeloractl clusters' lists)")
			return func(c *cli, ctx context.Context, names []string) error { return c.rollingStatus(ctx, names, *cluster) }
		}},
	},
}

// memberClusterFlag is -cluster for a command about members (fence mappings, evacuation,
// rolling reboots): the cluster they are in, since a member name is unique within its
// cluster only.
func memberClusterFlag(fs *flag.FlagSet) *string {
	return fs.String("cluster", "", "the members' cluster (a name 'apeloractl clusters' lists); default: the cluster their machine records name, else the only one")
}

func (c *cli) startRollingReboot(ctx context.Context, members []string, cluster string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.StartRollingRebootResponse, planView, error) {
		r, err := client.StartRollingReboot(ctx, c.gql, client.StartRollingRebootInput{Members: members, Cluster: orNil(cluster), DryRun: dryRun, PlanHash: planHash})
		return r, r.GetStartRollingReboot().Plan, err
	}, func(r *client.StartRollingRebootResponse) error {
		var reboot *client.RollingRebootFields
		if p := r.StartRollingReboot.RollingReboot; p != nil {
			reboot = &p.RollingRebootFields
		}
		return c.printRolling(reboot)
	})
}

func (c *cli) pauseRollingReboot(ctx context.Context, id []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.PauseRollingRebootResponse, planView, error) {
		r, err := client.PauseRollingReboot(ctx, c.gql, client.RollingRebootInput{Id: id[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetPauseRollingReboot().Plan, err
	}, func(r *client.PauseRollingRebootResponse) error {
		var reboot *client.RollingRebootFields
		if p := r.PauseRollingReboot.RollingReboot; p != nil {
			reboot = &p.RollingRebootFields
		}
		return c.printRolling(reboot)
	})
}

func (c *cli) resumeRollingReboot(ctx context.Context, id []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.ResumeRollingRebootResponse, planView, error) {
		r, err := client.ResumeRollingReboot(ctx, c.gql, client.RollingRebootInput{Id: id[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetResumeRollingReboot().Plan, err
	}, func(r *client.ResumeRollingRebootResponse) error {
		var reboot *client.RollingRebootFields
		if p := r.ResumeRollingReboot.RollingReboot; p != nil {
			reboot = &p.RollingRebootFields
		}
		return c.printRolling(reboot)
	})
}

func (c *cli) cancelRollingReboot(ctx context.Context, id []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.CancelRollingRebootResponse, planView, error) {
		r, err := client.CancelRollingReboot(ctx, c.gql, client.RollingRebootInput{Id: id[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetCancelRollingReboot().Plan, err
	}, func(r *client.CancelRollingRebootResponse) error {
		var reboot *client.RollingRebootFields
		if p := r.CancelRollingReboot.RollingReboot; p != nil {
			reboot = &p.RollingRebootFields
		}
		return c.printRolling(reboot)
	})
}

func (c *cli) rollingStatus(ctx context.Context, names []string, cluster string) error {
	var id *string
	if len(names) == 1 {
		id = &names[0]
	}
	r, err := client.RollingReboot(ctx, c.gql, id, orNil(cluster))
	if err != nil {
		return err
	}
	if r.RollingReboot == nil {
		fmt.Fprintln(c.out, "no rolling reboot yet")
		return nil
	}
	return c.printRolling(&r.RollingReboot.RollingRebootFields)
}

func (c *cli) printRolling(reboot *client.RollingRebootFields) error {
	if reboot == nil {
		return fmt.Errorf("the server answered no rolling reboot")
	}
	return c.print(reboot, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "rolling reboot:\t%s\n", reboot.Id)
		if reboot.Cluster != nil {
			fmt.Fprintf(w, "cluster:\t%s\n", reboot.Cluster.Name)
		}
		fmt.Fprintf(w, "state:\t%s\n", reboot.State)
		fmt.Fprintf(w, "members:\t%s (%d of %d done)\n", strings.Join(reboot.Members, ", "), reboot.Done, len(reboot.Members))
		if reboot.Current != nil {
			fmt.Fprintf(w, "current:\t%s, stage %s for %.0f s\n", *reboot.Current, reboot.Stage, reboot.StageSeconds)
		}
		if reboot.Reason != "" {
			fmt.Fprintf(w, "reason:\t%s\n", reboot.Reason)
		}
		fmt.Fprintf(w, "started:\t%s by %s\n", reboot.StartedAt.UTC().Format("2006-01-02 15:04:05Z"), reboot.StartedBy)
	})
}
