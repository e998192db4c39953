package main

// Machines: every machine with its phase, one machine, and its record (register,
// unregister).

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apelora/fabric/client"
)

func (c *cli) machines(ctx context.Context) error {
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

func (c *cli) machine(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageError("apeloractl machine NAME")
	}
	r, err := client.Machine(ctx, c.gql, args[0])
	if err != nil {
		return err
	}
	if r.Machine == nil {
		return &apiError{errs: []codedMessage{{"NOT_FOUND", fmt.Sprintf("no machine named %q: list them with `apeloractl machines`", args[0])}}}
	}
	return c.printMachine(&r.Machine.MachineFields)
}

func (c *cli) register(ctx context.Context, args []string) error {
	const use = "apeloractl register NAME [-provisioner MANUAL|MAAS] [-description TEXT] [-maas-system-id ID]"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError(use)
	}
	name := args[0]
	fs := newFlags("register")
	prov := fs.String("provisioner", "MANUAL", "MANUAL or MAAS")
	desc := fs.String("description", "", "free text")
	sysID := fs.String("maas-system-id", "", "the MAAS system id (MAAS machines)")
	if err := parseFlags(fs, args[1:], use); err != nil {
		return err
	}
	in := client.RegisterMachineInput{Name: name, Provisioner: client.ProvisionerKind(strings.ToUpper(*prov)), Description: desc}
	if *sysID != "" {
		in.MaasSystemId = sysID
	}
	in.DryRun = c.dry()
	in.PlanHash = c.planHash
	r, err := client.RegisterMachine(ctx, c.gql, in)
	if err != nil || c.dryRun {
		return c.planOr(err, r.GetRegisterMachine().Plan)
	}
	return c.printMachine(&r.RegisterMachine.Machine.MachineFields)
}

func (c *cli) unregister(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageError("apeloractl unregister NAME")
	}
	r, err := client.UnregisterMachine(ctx, c.gql, client.UnregisterMachineInput{Name: args[0], DryRun: c.dry(), PlanHash: c.planHash})
	if err != nil || c.dryRun {
		return c.planOr(err, r.GetUnregisterMachine().Plan)
	}
	fmt.Fprintf(c.out, "unregistered %s\n", str(r.UnregisterMachine.Name))
	return nil
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
