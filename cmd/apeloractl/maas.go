package main

// MAAS steps on a registered machine: commission, install, hardware tests, release. Each
// takes its own flags only: -series given to commission is refused, not ignored.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

var (
	commissionCommand = &command{
		name: "commission", synopsis: "SYSTEM-ID [-tests a,b | -no-tests]", names: 1,
		mutation: "commissionMachine",
		flags: func(fs *flag.FlagSet) runner {
			tests := testsFlag(fs)
			noTests := fs.Bool("no-tests", false, "commission without tests")
			return func(c *cli, ctx context.Context, names []string) error {
				in := client.CommissionMachineInput{SystemId: names[0], Tests: testList(*tests)}
				if *noTests {
					in.Tests = []string{}
				}
				return change(c, func(dryRun *bool, planHash *string) (*client.CommissionMachineResponse, planView, error) {
					in.DryRun, in.PlanHash = dryRun, planHash
					r, err := client.CommissionMachine(ctx, c.gql, in)
					return r, r.GetCommissionMachine().Plan, err
				}, func(r *client.CommissionMachineResponse) error {
					return c.printMaasMachine(&r.CommissionMachine.Maas.MaasMachineFields)
				})
			}
		},
	}
	installCommand = &command{
		name: "install", synopsis: "NAME -series SERIES [-cluster NAME]", doc: "install an OS on a registered MAAS machine and enrol it\n(-cluster: the cluster it joins; default: the record's)", names: 1,
		mutation: "installOperatingSystem",
		flags: func(fs *flag.FlagSet) runner {
			series := fs.String("series", "", "the series to install, e.g. noble")
			cluster := clusterFlag(fs)
			return func(c *cli, ctx context.Context, names []string) error {
				return change(c, func(dryRun *bool, planHash *string) (*client.InstallOperatingSystemResponse, planView, error) {
					r, err := client.InstallOperatingSystem(ctx, c.gql, client.InstallOperatingSystemInput{Name: names[0], Series: *series, Cluster: orNil(*cluster), DryRun: dryRun, PlanHash: planHash})
					return r, r.GetInstallOperatingSystem().Plan, err
				}, func(r *client.InstallOperatingSystemResponse) error {
					return c.printMaasMachine(&r.InstallOperatingSystem.Maas.MaasMachineFields)
				})
			}
		},
	}
	hardwareTestCommand = &command{
		name: "hardware-test", synopsis: "SYSTEM-ID -hostname HOSTNAME [-tests a,b]", names: 1,
		mutation: "runHardwareTests",
		flags: func(fs *flag.FlagSet) runner {
			hostname := fs.String("hostname", "", "the machine's hostname, typed again to confirm")
			tests := testsFlag(fs)
			return func(c *cli, ctx context.Context, names []string) error {
				return change(c, func(dryRun *bool, planHash *string) (*client.RunHardwareTestsResponse, planView, error) {
					r, err := client.RunHardwareTests(ctx, c.gql, client.RunHardwareTestsInput{SystemId: names[0], Hostname: *hostname, Tests: testList(*tests), DryRun: dryRun, PlanHash: planHash})
					return r, r.GetRunHardwareTests().Plan, err
				}, func(r *client.RunHardwareTestsResponse) error {
					return c.printMaasMachine(&r.RunHardwareTests.Maas.MaasMachineFields)
				})
			}
		},
	}
	releaseCommand = &command{
		name: "release", synopsis: "SYSTEM-ID [-erase] [-comment TEXT]", doc: "return it to MAAS's pool (says first whether MAAS will\nerase the disks anyway)", names: 1,
		mutation: "releaseMachine",
		flags: func(fs *flag.FlagSet) runner {
			erase := fs.Bool("erase", false, "erase the disks (needs hardware.delete)")
			comment := fs.String("comment", "", "a comment for MAAS")
			return func(c *cli, ctx context.Context, names []string) error {
				return change(c, func(dryRun *bool, planHash *string) (*client.ReleaseMachineResponse, planView, error) {
					r, err := client.ReleaseMachine(ctx, c.gql, client.ReleaseMachineInput{SystemId: names[0], Erase: erase, Comment: comment, DryRun: dryRun, PlanHash: planHash})
					return r, r.GetReleaseMachine().Plan, err
				}, func(r *client.ReleaseMachineResponse) error {
					if e := r.ReleaseMachine.Erase; e != nil {
						fmt.Fprintf(c.out, "disks: %s\n", e.Message)
					}
					return c.printMaasMachine(&r.ReleaseMachine.Maas.MaasMachineFields)
				})
			}
		},
	}
)

func testsFlag(fs *flag.FlagSet) *string {
	return fs.String("tests", "", "comma-separated testing scripts or tags (at most 16)")
}

// testList is -tests as the input takes it: nil (MAAS's defaults) when not given.
func testList(tests string) []string {
	if tests == "" {
		return nil
	}
	return strings.Split(tests, ",")
}

func (c *cli) printMaasMachine(m *client.MaasMachineFields) error {
	return c.print(m, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s\t%s\t%s\n", m.SystemId, m.Hostname, m.Status)
	})
}
