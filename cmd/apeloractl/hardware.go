package main

// Hardware profiles: what a class of machine must have (admission compares each machine
// with the profile assigned to it). Declare, replace or remove one; assign one to a
// machine or clear its.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

var (
	hardwareProfilesCommand = &command{
		name: "hardware-profiles", doc: "every hardware profile: what it requires, its machines",
		run: (*cli).hardwareProfiles,
	}
	setHardwareProfileCommand = &command{
		name: "set-hardware-profile", synopsis: "NAME -architecture ARCH [-description TEXT] [-min-… N ...]", names: 1,
		doc: "declare a hardware profile, or replace the one of that\nname: -min-cpu-cores, -min-memory-mib, -min-disks,\n" +
			"-min-disk-size-gb, -min-nics, -min-nic-speed-mbps (0, the\ndefault, asks nothing of that aspect)",
		mutation: "setHardwareProfile",
		flags: func(fs *flag.FlagSet) runner {
			in := client.SetHardwareProfileInput{Description: new(string)}
			fs.StringVar(&in.Architecture, "architecture", "", "x86_64, aarch64 … (Debian's and MAAS's names such as amd64 are accepted)")
			fs.StringVar(in.Description, "description", "", "free text")
			mins := []struct {
				field **int
				flag  string
				usage string
			}{
				{&in.MinCpuCores, "min-cpu-cores", "logical CPUs"},
				{&in.MinMemoryMiB, "min-memory-mib", "memory in MiB"},
				{&in.MinDisks, "min-disks", "disks of at least -min-disk-size-gb each"},
				{&in.MinDiskSizeGB, "min-disk-size-gb", "decimal gigabytes per disk"},
				{&in.MinNics, "min-nics", "network ports reaching -min-nic-speed-mbps each"},
				{&in.MinNicSpeedMbps, "min-nic-speed-mbps", "link speed in Mbit/s"},
			}
			for _, m := range mins {
				*m.field = fs.Int(m.flag, 0, m.usage+" (0: asks nothing)")
			}
			return func(c *cli, ctx context.Context, names []string) error {
				in.Profile = names[0]
				return c.setHardwareProfile(ctx, in)
			}
		},
	}
	removeHardwareProfileCommand = &command{
		name: "remove-hardware-profile", synopsis: "NAME", names: 1,
		doc:      "remove a hardware profile no machine is assigned",
		mutation: "removeHardwareProfile", run: (*cli).removeHardwareProfile,
	}
	assignHardwareProfileCommand = &command{
		name: "assign-hardware-profile", synopsis: "MACHINE PROFILE", names: 2,
		doc:      "admission compares the machine with this profile from\nits next check on",
		mutation: "assignHardwareProfile", run: (*cli).assignHardwareProfile,
	}
	clearHardwareProfileCommand = &command{
		name: "clear-hardware-profile", synopsis: "MACHINE", names: 1,
		doc:      "admission compares the machine with no profile",
		mutation: "clearHardwareProfile", run: (*cli).clearHardwareProfile,
	}
)

func (c *cli) hardwareProfiles(ctx context.Context, _ []string) error {
	r, err := client.HardwareProfiles(ctx, c.gql)
	if err != nil {
		return err
	}
	ps := make([]client.HardwareProfileFields, len(r.HardwareProfiles))
	for i := range r.HardwareProfiles {
		ps[i] = r.HardwareProfiles[i].HardwareProfileFields
	}
	return c.print(ps, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "PROFILE\tREQUIRES\tMACHINES\tSET")
		for _, p := range ps {
			machines := strings.Join(p.Machines, ",")
			if machines == "" {
				machines = "-"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s by %s\n", p.Name, requirements(&p), machines, when(&p.SetAt), p.SetBy)
		}
	})
}

// requirements is what a profile asks, the minimums of 0 left out.
func requirements(p *client.HardwareProfileFields) string {
	out := []string{p.Architecture}
	for _, r := range []struct {
		n    int
		unit string
	}{
		{p.MinCpuCores, "CPUs"}, {p.MinMemoryMiB, "MiB"},
	} {
		if r.n > 0 {
			out = append(out, fmt.Sprintf("%d %s", r.n, r.unit))
		}
	}
	if p.MinDisks > 0 {
		out = append(out, fmt.Sprintf("%d disks ≥ %d GB", p.MinDisks, p.MinDiskSizeGB))
	}
	if p.MinNics > 0 {
		out = append(out, fmt.Sprintf("%d NICs ≥ %d Mbit/s", p.MinNics, p.MinNicSpeedMbps))
	}
	return strings.Join(out, ", ")
}

func (c *cli) setHardwareProfile(ctx context.Context, in client.SetHardwareProfileInput) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.SetHardwareProfileResponse, planView, error) {
		in.DryRun, in.PlanHash = dryRun, planHash
		r, err := client.SetHardwareProfile(ctx, c.gql, in)
		return r, r.GetSetHardwareProfile().Plan, err
	}, func(r *client.SetHardwareProfileResponse) error {
		p := r.SetHardwareProfile
		if c.json {
			return c.print(p, nil)
		}
		verb := "declared"
		if p.Previous != nil {
			verb = "replaced"
		}
		fmt.Fprintf(c.out, "%s hardware profile %s: %s\n", verb, p.Profile.Name, requirements(&p.Profile.HardwareProfileFields))
		return nil
	})
}

func (c *cli) removeHardwareProfile(ctx context.Context, names []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.RemoveHardwareProfileResponse, planView, error) {
		r, err := client.RemoveHardwareProfile(ctx, c.gql, client.RemoveHardwareProfileInput{Profile: names[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetRemoveHardwareProfile().Plan, err
	}, func(r *client.RemoveHardwareProfileResponse) error {
		if c.json {
			return c.print(r.RemoveHardwareProfile, nil)
		}
		fmt.Fprintf(c.out, "removed hardware profile %s\n", names[0])
		return nil
	})
}

func (c *cli) assignHardwareProfile(ctx context.Context, names []string) error {
	machine, profile := names[0], names[1]
	return change(c, func(dryRun *bool, planHash *string) (*client.AssignHardwareProfileResponse, planView, error) {
		r, err := client.AssignHardwareProfile(ctx, c.gql, client.AssignHardwareProfileInput{Machine: machine, Profile: profile, DryRun: dryRun, PlanHash: planHash})
		return r, r.GetAssignHardwareProfile().Plan, err
	}, func(r *client.AssignHardwareProfileResponse) error {
		if c.json {
			return c.print(r.AssignHardwareProfile, nil)
		}
		fmt.Fprintf(c.out, "assigned hardware profile %s to %s", profile, machine)
		if prev := r.AssignHardwareProfile.PreviousProfile; prev != nil {
			fmt.Fprintf(c.out, " (it had %s)", *prev)
		}
		fmt.Fprintln(c.out, ": its next admission check compares it with the profile")
		return nil
	})
}

func (c *cli) clearHardwareProfile(ctx context.Context, names []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.ClearHardwareProfileResponse, planView, error) {
		r, err := client.ClearHardwareProfile(ctx, c.gql, client.ClearHardwareProfileInput{Machine: names[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetClearHardwareProfile().Plan, err
	}, func(r *client.ClearHardwareProfileResponse) error {
		if c.json {
			return c.print(r.ClearHardwareProfile, nil)
		}
		prev := r.ClearHardwareProfile.PreviousProfile
		if prev == nil {
			fmt.Fprintf(c.out, "%s had no hardware profile\n", names[0])
			return nil
		}
		fmt.Fprintf(c.out, "cleared the hardware profile of %s (it had %s)\n", names[0], *prev)
		return nil
	})
}
