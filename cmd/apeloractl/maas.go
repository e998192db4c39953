package main

// MAAS steps on a registered machine: commission, install, hardware tests, release.

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

func (c *cli) maasStep(ctx context.Context, cmd string, args []string) error {
	use := maasStepUsage[cmd]
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError(use)
	}
	subject := args[0]
	// Each step takes its own flags only: -series given to commission is refused, not ignored.
	fs := newFlags(cmd)
	var tests, series, hostname, comment *string
	var noTests, erase *bool
	none, no := "", false
	tests, series, hostname, comment, noTests, erase = &none, &none, &none, &none, &no, &no
	switch cmd {
	case "commission":
		tests = fs.String("tests", "", "comma-separated testing scripts or tags (at most 16)")
		noTests = fs.Bool("no-tests", false, "commission without tests")
	case "install":
		series = fs.String("series", "", "the series to install, e.g. noble")
	case "hardware-test":
		hostname = fs.String("hostname", "", "the machine's hostname, typed again to confirm")
		tests = fs.String("tests", "", "comma-separated testing scripts or tags (at most 16)")
	case "release":
		erase = fs.Bool("erase", false, "erase the disks (needs hardware.delete)")
		comment = fs.String("comment", "", "a comment for MAAS")
	}
	if err := parseFlags(fs, args[1:], use); err != nil {
		return err
	}
	var testList []string
	if *tests != "" {
		testList = strings.Split(*tests, ",")
	}
	if *noTests {
		testList = []string{}
	}
	var m *client.MaasMachineFields
	switch cmd {
	case "commission":
		r, err := client.CommissionMachine(ctx, c.gql, client.CommissionMachineInput{SystemId: subject, Tests: testList, DryRun: c.dry(), PlanHash: c.planHash})
		if err != nil || c.dryRun {
			return c.planOr(err, r.GetCommissionMachine().Plan)
		}
		m = &r.CommissionMachine.Maas.MaasMachineFields
	case "install":
		r, err := client.InstallOperatingSystem(ctx, c.gql, client.InstallOperatingSystemInput{Name: subject, Series: *series, DryRun: c.dry(), PlanHash: c.planHash})
		if err != nil || c.dryRun {
			return c.planOr(err, r.GetInstallOperatingSystem().Plan)
		}
		m = &r.InstallOperatingSystem.Maas.MaasMachineFields
	case "hardware-test":
		r, err := client.RunHardwareTests(ctx, c.gql, client.RunHardwareTestsInput{SystemId: subject, Hostname: *hostname, Tests: testList, DryRun: c.dry(), PlanHash: c.planHash})
		if err != nil || c.dryRun {
			return c.planOr(err, r.GetRunHardwareTests().Plan)
		}
		m = &r.RunHardwareTests.Maas.MaasMachineFields
	case "release":
		r, err := client.ReleaseMachine(ctx, c.gql, client.ReleaseMachineInput{SystemId: subject, Erase: erase, Comment: comment, DryRun: c.dry(), PlanHash: c.planHash})
		if err != nil || c.dryRun {
			return c.planOr(err, r.GetReleaseMachine().Plan)
		}
		if e := r.ReleaseMachine.Erase; e != nil {
			fmt.Fprintf(c.out, "disks: %s\n", e.Message)
		}
		m = &r.ReleaseMachine.Maas.MaasMachineFields
	}
	return c.print(m, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s\t%s\t%s\n", m.SystemId, m.Hostname, m.Status)
	})
}

// maasStepUsage are the MAAS steps' usage lines, as the usage text has them.
var maasStepUsage = map[string]string{
	"commission":    "apeloractl commission SYSTEM-ID [-tests a,b | -no-tests]",
	"install":       "apeloractl install NAME -series SERIES",
	"hardware-test": "apeloractl hardware-test SYSTEM-ID -hostname HOSTNAME [-tests a,b]",
	"release":       "apeloractl release SYSTEM-ID [-erase] [-comment TEXT]",
}
