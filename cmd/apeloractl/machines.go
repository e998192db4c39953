package main

// Machines: every machine with its phase, one machine, and its record (register,
// unregister).

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apelora/fabric/client"
)

var (
	machinesCommand = &command{name: "machines", doc: "every machine with its phase", run: (*cli).machines}
	machineCommand  = &command{name: "machine", synopsis: "NAME", doc: "one machine", names: 1, run: (*cli).machine}
	registerCommand = &command{
		name: "register", synopsis: "NAME [-provisioner MANUAL|MAAS] [-description TEXT] [-maas-system-id ID]", names: 1,
		mutation: "registerMachine",
		flags: func(fs *flag.FlagSet) runner {
			prov := fs.String("provisioner", "MANUAL", "MANUAL or MAAS")
			desc := fs.String("description", "", "free text")
			sysID := fs.String("maas-system-id", "", "the MAAS system id (MAAS machines)")
			return func(c *cli, ctx context.Context, names []string) error {
				in := client.RegisterMachineInput{Name: names[0], Provisioner: client.ProvisionerKind(strings.ToUpper(*prov)), Description: desc}
				if *sysID != "" {
					in.MaasSystemId = sysID
				}
				return c.register(ctx, in)
			}
		},
	}
	unregisterCommand = &command{name: "unregister", synopsis: "NAME", names: 1, mutation: "unregisterMachine", run: (*cli).unregister}
)

func (c *cli) machines(ctx context.Context, _ []string) error {
	r, err := client.Machines(ctx, c.gql)
	if err != nil {
		return err
	}
	return c.print(r.Machines, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "NAME\tPHASE\tMEMBER\tPROVISIONER\tWARNINGS")
		for _, m := range r.Machines {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.Name, m.Phase, memberStatus(m.Member), provisioner(m.Record), warnings(m.Warnings))
		}
	})
}

func (c *cli) machine(ctx context.Context, names []string) error {
	r, err := client.Machine(ctx, c.gql, names[0])
	if err != nil {
		return err
	}
	if r.Machine == nil {
		return &apiError{errs: []codedMessage{{"NOT_FOUND", fmt.Sprintf("no machine named %q: list them with `apeloractl machines`", names[0])}}}
	}
	return c.printMachine(&r.Machine.MachineFields)
}

func (c *cli) register(ctx context.Context, in client.RegisterMachineInput) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.RegisterMachineResponse, planView, error) {
		in.DryRun, in.PlanHash = dryRun, planHash
		r, err := client.RegisterMachine(ctx, c.gql, in)
		return r, r.GetRegisterMachine().Plan, err
	}, func(r *client.RegisterMachineResponse) error {
		return c.printMachine(&r.RegisterMachine.Machine.MachineFields)
	})
}

func (c *cli) unregister(ctx context.Context, names []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.UnregisterMachineResponse, planView, error) {
		r, err := client.UnregisterMachine(ctx, c.gql, client.UnregisterMachineInput{Name: names[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetUnregisterMachine().Plan, err
	}, func(r *client.UnregisterMachineResponse) error {
		fmt.Fprintf(c.out, "unregistered %s\n", str(r.UnregisterMachine.Name))
		return nil
	})
}

func (c *cli) printMachine(m *client.MachineFields) error {
	return c.print(m, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "name:\t%s\n", m.Name)
		fmt.Fprintf(w, "phase:\t%s\n", m.Phase)
		fmt.Fprintf(w, "member:\t%s\n", memberStatus(m.Member))
		if m.PendingJoinToken != nil {
			fmt.Fprintf(w, "join token:\tpending, expires %s\n", m.PendingJoinToken.ExpiresAt.Local().Format(time.DateTime))
		}
		fmt.Fprintf(w, "provisioner:\t%s\n", provisioner(m.Record))
		if m.Record != nil {
			fmt.Fprintf(w, "registered:\t%s by %s\n", m.Record.RegisteredAt.Local().Format(time.DateTime), m.Record.RegisteredBy)
			if m.Record.Description != "" {
				fmt.Fprintf(w, "description:\t%s\n", m.Record.Description)
			}
			if m.Record.MaasSystemId != nil {
				fmt.Fprintf(w, "MAAS system id:\t%s\n", *m.Record.MaasSystemId)
			}
		}
		for _, wn := range m.Warnings {
			fmt.Fprintf(w, "warning:\t%s: %s\n", wn.Code, wn.Message)
		}
	})
}

func memberStatus(m *client.MachineFieldsMember) string {
	if m == nil {
		return "-"
	}
	if m.Held {
		return string(m.Status) + " (held)"
	}
	return string(m.Status)
}

func provisioner(r *client.MachineFieldsRecordMachineRecord) string {
	if r == nil {
		return "-"
	}
	return string(r.Provisioner.Kind)
}

func warnings(ws []client.MachineFieldsWarningsWarning) string {
	codes := make([]string, len(ws))
	for i, w := range ws {
		codes[i] = string(w.Code)
	}
	if len(codes) == 0 {
		return "-"
	}
	return strings.Join(codes, ",")
}
