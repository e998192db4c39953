// Command apeloractl is a small command-line client for the Apelora fabric API, built on
// the generated Go client (package client) so automation and people use the same calls.
//
//	APELORA_URL=http://127.0.0.1:8080 APELORA_TOKEN=apl_… apeloractl machines
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/Khan/genqlient/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/admission"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/internal/buildinfo"
)

const usage = `usage: apeloractl [-json] COMMAND [ARGS]

environment: APELORA_URL (default http://127.0.0.1:8080), APELORA_TOKEN (bearer token; when
unset, the session token "apeloractl login" kept in the user's config folder;
APELORA_SESSION_FILE to put it elsewhere)

commands:
  login                           sign in through the server's single sign-on (device
                                  authorization grant): prints a code to approve at the
                                  identity provider, then keeps a short-lived Apelora
                                  session token (mode 0600), never the provider's tokens
  logout                          end that session (on the server too) and remove it
  whoami                          the identity the token belongs to
  machines                        every machine with its phase
  machine NAME                    one machine
  register NAME [-provisioner MANUAL|MAAS] [-description TEXT] [-maas-system-id ID]
  unregister NAME
  approve NAME [-member-config ENTITY/NAME/KEY=VALUE ...]
                                  approve enrolment: prints the join token ONCE and the
                                  command to run on the new server
  revoke NAME                     revoke the pending join token
  report NAME                     run the admission checks (changes nothing)
  admit NAME                      run the checks and admit the member if none fails
  remove NAME [-force]            remove the member from the cluster
  evacuate NAME [-mode auto|migrate|live-migrate|stop]
                                  maintenance: Incus moves or stops every instance on the
                                  member (each as its cluster.evacuate says, or -mode)
  restore NAME                    run the admission checks again, then Incus brings the
                                  member's instances back
  rolling-reboot start NAME [NAME ...] | pause ID | resume ID | cancel ID | status [ID]
                                  reboot members one at a time through MAAS (evacuate,
                                  power cycle, wait until Incus lists it, checks, restore);
                                  apelora-worker drives it, status shows where it stands
  bulk STEP [NAME ...] [-confirm N] [-concurrency N] [STEP'S FLAGS]
                                  one step for a set of machines, each its own audited call,
                                  all under one request id: register (discovered),
                                  commission, hardware-test, install, admit, release; names
                                  from the arguments, else from standard input. Prints the
                                  plan for the set (how many would go ahead, the refusals
                                  grouped by reason), then each machine's result as it
                                  arrives (done, refused, failed) and how to retry the
                                  failed. Above 10 machines, -confirm repeats the count.
  audit [-machine NAME] [-first N] the audit trail, newest first
  watch-audit [-machine NAME] [-after ID]
                                  print audit events as they are recorded (after ID: those
                                  recorded since that event first, none missed or repeated)
  watch-admission NAME            print admission check results as they are computed
  fleet                           every machine with its MAAS status, and which sources answered
  watch-fleet                     the fleet, then each change as it happens (fleetUpdates):
                                  "+" added, "~" changed, "-" removed, with the revision
  commission SYSTEM-ID [-tests a,b | -no-tests]
  install NAME -series SERIES     install an OS on a registered MAAS machine and enrol it
  hardware-test SYSTEM-ID -hostname HOSTNAME [-tests a,b]
  release SYSTEM-ID [-erase] [-comment TEXT]   (says first whether MAAS will erase anyway)
  identities                      every identity: permissions, status, last use, expiry
  create-identity NAME -permission PERM [-permission PERM ...] [-expires 90d|RFC3339]
                                  create an identity: prints its bearer token ONCE
  revoke-identity NAME            revoke an identity at once (its websockets close too)
  placement-guard [on|off]        the placement guard's state, or turn it on or off: on,
                                  Incus places untargeted instances only on admitted members
  version                         the version and the commit apeloractl was built from

-dry-run, after any command that changes something (register, unregister, approve, revoke,
admit, remove, evacuate, restore, rolling-reboot start|pause|resume|cancel, commission,
install, hardware-test, release, bulk, create-identity, revoke-identity, placement-guard
on|off), changes nothing and prints the plan: the steps it would take in Incus, MAAS
and the database, and what would refuse or qualify it. A plan that would be refused
exits as the call would (the refusal's code). It issues no token and is no audit event.
Its last line is the plan's hash: run the same command again with -plan-hash HASH instead
of -dry-run to make the change only while its plan is still that one (else PLAN_CHANGED:
nothing changed, look again). Without -plan-hash the audit event says no plan was shown.

errors are printed as CODE: message (the API's extensions.code). exit status:
  0 done   1 any other error   2 usage   3 UNAUTHENTICATED (no or wrong token)
  4 FORBIDDEN (the identity lacks a permission)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	if err != nil {
		var api *apiError
		if errors.As(err, &api) {
			fmt.Fprintln(os.Stderr, err)
		} else {
			fmt.Fprintln(os.Stderr, "apeloractl:", err)
		}
	}
	os.Exit(exitStatus(err))
}

type cli struct {
	endpoint, token string
	json            bool
	dryRun          bool    // -dry-run: ask for the plan only
	planHash        *string // -plan-hash: the plan this change confirms
	out             io.Writer
	gql             graphql.Client
}

// run runs one command; an error from the API comes back as an *apiError.
func run(ctx context.Context, args []string, out io.Writer) error {
	return explain(runCommand(ctx, args, out))
}

func runCommand(ctx context.Context, args []string, out io.Writer) error {
	global := flag.NewFlagSet("apeloractl", flag.ContinueOnError)
	asJSON := global.Bool("json", false, "print JSON instead of a table")
	global.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	if err := global.Parse(args); err != nil {
		return usageError(err.Error())
	}
	args = global.Args()
	if len(args) == 0 {
		global.Usage()
		return usageError("no command given")
	}
	// Before the token: a version needs no API.
	if args[0] == "version" {
		fmt.Fprintln(out, buildinfo.Read().Line("apeloractl"))
		return nil
	}
	base := strings.TrimSuffix(os.Getenv("APELORA_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	switch args[0] {
	case "login":
		return login(ctx, base, out)
	case "logout":
		return logout(ctx, base, out)
	}
	c := &cli{endpoint: base + "/graphql", token: os.Getenv("APELORA_TOKEN"), json: *asJSON, out: out}
	if c.token == "" {
		c.token = savedSession() // from `apeloractl login`
	}
	if c.token == "" {
		return &apiError{errs: []codedMessage{{"UNAUTHENTICATED", "APELORA_TOKEN is not set: create a token with `apelora identity create` and export it, or sign in through single sign-on with `apeloractl login`"}}}
	}
	c.gql = client.New(c.endpoint, c.token, nil)
	cmd, rest := args[0], args[1:]
	rest, c.dryRun = takeDryRun(rest)
	if c.dryRun && !changing(cmd) && cmd != "bulk" {
		return usageError(cmd + " changes nothing: -dry-run is for the commands that do (see `apeloractl help`)")
	}
	var err error
	if rest, c.planHash, err = takePlanHash(rest); err != nil {
		return err
	}
	if c.planHash != nil && (c.dryRun || !changing(cmd)) {
		return usageError("-plan-hash confirms the plan a -dry-run printed: give it instead of -dry-run, to a command that changes something")
	}
	switch cmd {
	case "whoami":
		r, err := client.Viewer(ctx, c.gql)
		if err != nil {
			return err
		}
		return c.print(r.Viewer, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "%s\t%v\n", r.Viewer.Name, r.Viewer.Permissions)
		})
	case "machines":
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
	case "machine":
		if len(rest) != 1 {
			return usageError("apeloractl machine NAME")
		}
		r, err := client.Machine(ctx, c.gql, rest[0])
		if err != nil {
			return err
		}
		if r.Machine == nil {
			return &apiError{errs: []codedMessage{{"NOT_FOUND", fmt.Sprintf("no machine named %q: list them with `apeloractl machines`", rest[0])}}}
		}
		return c.printMachine(&r.Machine.MachineFields)
	case "register":
		return c.register(ctx, rest)
	case "unregister":
		if len(rest) != 1 {
			return usageError("apeloractl unregister NAME")
		}
		r, err := client.UnregisterMachine(ctx, c.gql, client.UnregisterMachineInput{Name: rest[0], DryRun: c.dry(), PlanHash: c.planHash})
		if err != nil || c.dryRun {
			return c.planOr(err, r.GetUnregisterMachine().Plan)
		}
		fmt.Fprintf(out, "unregistered %s\n", str(r.UnregisterMachine.Name))
		return nil
	case "approve":
		return c.approve(ctx, rest)
	case "revoke":
		if len(rest) != 1 {
			return usageError("apeloractl revoke NAME")
		}
		r, err := client.RevokeJoinToken(ctx, c.gql, client.RevokeJoinTokenInput{Name: rest[0], DryRun: c.dry(), PlanHash: c.planHash})
		if err != nil || c.dryRun {
			return c.planOr(err, r.GetRevokeJoinToken().Plan)
		}
		fmt.Fprintf(out, "revoked the pending join token for %s\n", rest[0])
		return nil
	case "report":
		if len(rest) != 1 {
			return usageError("apeloractl report NAME")
		}
		r, err := client.AdmissionReport(ctx, c.gql, rest[0])
		if err != nil {
			return err
		}
		return c.printReport(&r.AdmissionReport.AdmissionReportFields)
	case "admit":
		if len(rest) != 1 {
			return usageError("apeloractl admit NAME")
		}
		r, err := client.AdmitMember(ctx, c.gql, client.AdmitMemberInput{Name: rest[0], DryRun: c.dry(), PlanHash: c.planHash})
		if err != nil || c.dryRun {
			return c.planOr(err, r.GetAdmitMember().Plan)
		}
		if err := c.printReport(&r.AdmitMember.Report.AdmissionReportFields); err != nil {
			return err
		}
		if !c.json {
			fmt.Fprintf(out, "admitted %s: automatic placement reaches it now\n", rest[0])
		}
		return nil
	case "remove":
		return c.remove(ctx, rest)
	case "evacuate":
		return c.evacuate(ctx, rest)
	case "restore":
		return c.restore(ctx, rest)
	case "rolling-reboot":
		return c.rollingReboot(ctx, rest)
	case "watch-admission":
		return c.watchAdmission(ctx, rest)
	case "fleet":
		return c.fleet(ctx)
	case "watch-fleet":
		return c.watchFleet(ctx)
	case "commission", "install", "hardware-test", "release":
		return c.maasStep(ctx, cmd, rest)
	case "bulk":
		return c.bulk(ctx, rest, stdin)
	case "audit":
		return c.audit(ctx, rest)
	case "watch-audit":
		return c.watchAudit(ctx, rest)
	case "identities":
		return c.identities(ctx)
	case "placement-guard":
		return c.placementGuard(ctx, rest)
	case "create-identity":
		return c.createIdentity(ctx, rest)
	case "revoke-identity":
		return c.revokeIdentity(ctx, rest)
	default:
		global.Usage()
		return usageError(fmt.Sprintf("unknown command %q", cmd))
	}
}

// usageError is a command line apeloractl cannot run.
type usageError string

func (e usageError) Error() string { return "usage: " + string(e) }

// codedMessage is one error of the API: its extensions.code and message.
type codedMessage struct{ code, message string }

// apiError is what the API refused, one CODE: message line per error.
type apiError struct{ errs []codedMessage }

func (e *apiError) Error() string {
	lines := make([]string, len(e.errs))
	for i, m := range e.errs {
		lines[i] = m.code + ": " + m.message
	}
	return strings.Join(lines, "\n")
}

// explain turns the client's errors (a GraphQL error list, or an HTTP error carrying one)
// into an *apiError, so that they print as CODE: message and never as gqlparser's
// "input:3:2: …".
func explain(err error) error {
	var list gqlerror.List
	var httpErr *graphql.HTTPError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &list):
	case errors.As(err, &httpErr):
		list = httpErr.Response.Errors
		if len(list) == 0 || list[0].Extensions["code"] == nil {
			msg := fmt.Sprintf("the server answered HTTP %d", httpErr.StatusCode)
			if len(list) > 0 {
				msg += ": " + truncate(list[0].Message, 200)
			}
			return &apiError{errs: []codedMessage{{"UNAVAILABLE", msg}}}
		}
	default:
		return err
	}
	out := &apiError{}
	for _, e := range list {
		code, _ := e.Extensions["code"].(string)
		if code == "" {
			code = "INTERNAL"
		}
		out.errs = append(out.errs, codedMessage{code, e.Message})
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// The exit statuses, in the usage text and the README.
const (
	exitError           = 1
	exitUsage           = 2
	exitUnauthenticated = 3
	exitForbidden       = 4
)

func exitStatus(err error) int {
	var api *apiError
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &api):
		for _, e := range api.errs {
			switch e.code {
			case "UNAUTHENTICATED":
				return exitUnauthenticated
			case "FORBIDDEN":
				return exitForbidden
			}
		}
	}
	return exitError
}

func (c *cli) register(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError("apeloractl register NAME [-provisioner MANUAL|MAAS] [-description TEXT] [-maas-system-id ID]")
	}
	name := args[0]
	fs := flag.NewFlagSet("register", flag.ContinueOnError)
	prov := fs.String("provisioner", "MANUAL", "MANUAL or MAAS")
	desc := fs.String("description", "", "free text")
	sysID := fs.String("maas-system-id", "", "the MAAS system id (MAAS machines)")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError(err.Error())
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

func (c *cli) fleet(ctx context.Context) error {
	r, err := client.Fleet(ctx, c.gql)
	if err != nil {
		return err
	}
	f := r.Fleet
	return c.print(f, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "NAME\tPHASE\tMEMBER\tMAAS\tSYSTEM ID\tPOWER\tTESTS\tWARNINGS")
		for _, m := range f.Machines {
			maasStatus, sysID, power, tests := "-", "-", "-", "-"
			if m.Maas != nil {
				maasStatus, sysID, power, tests = m.Maas.Status, m.Maas.SystemId, m.Maas.PowerState, m.Maas.TestingStatus
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Phase, memberStatus(m.Member), maasStatus, sysID, power, tests, warnings(m.Warnings))
		}
		for name, s := range map[string]client.SourceFields{"incus": f.Sources.Incus.SourceFields, "maas": f.Sources.Maas.SourceFields} {
			if !s.Available {
				fmt.Fprintf(w, "%s:\t%s\n", name, s.Message)
			}
		}
	})
}

func (c *cli) maasStep(ctx context.Context, cmd string, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError("see `apeloractl help` for " + cmd)
	}
	subject := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	tests := fs.String("tests", "", "comma-separated testing scripts or tags (at most 16)")
	noTests := fs.Bool("no-tests", false, "commission without tests")
	series := fs.String("series", "", "the series to install, e.g. noble")
	hostname := fs.String("hostname", "", "the machine's hostname, typed again to confirm")
	erase := fs.Bool("erase", false, "erase the disks (needs hardware.delete)")
	comment := fs.String("comment", "", "a comment for MAAS")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError(err.Error())
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

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func (c *cli) approve(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError("apeloractl approve NAME [-member-config ENTITY/NAME/KEY=VALUE ...]")
	}
	name := args[0]
	fs := flag.NewFlagSet("approve", flag.ContinueOnError)
	var cfg multiFlag
	fs.Var(&cfg, "member-config", "ENTITY/NAME/KEY=VALUE, for example storage-pool/local/source=/dev/sdb; repeat")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError(err.Error())
	}
	in := client.ApproveEnrolmentInput{Name: name}
	for _, e := range cfg {
		id, value, ok := strings.Cut(e, "=")
		parts := strings.Split(id, "/")
		if !ok || len(parts) != 3 {
			return usageError(fmt.Sprintf("-member-config %q: write ENTITY/NAME/KEY=VALUE", e))
		}
		in.MemberConfig = append(in.MemberConfig, client.MemberConfigInput{Entity: parts[0], Name: parts[1], Key: parts[2], Value: value})
	}
	in.DryRun = c.dry()
	in.PlanHash = c.planHash
	r, err := client.ApproveEnrolment(ctx, c.gql, in)
	if err != nil || c.dryRun {
		return c.planOr(err, r.GetApproveEnrolment().Plan)
	}
	a := r.ApproveEnrolment
	if c.json {
		return c.print(a, nil)
	}
	fmt.Fprintf(c.out, "approved the enrolment of %s; the join token expires %s\n\n", name, a.ExpiresAt.Local().Format(time.DateTime))
	fmt.Fprintf(c.out, "join token (shown only now; Apelora does not keep it):\n%s\n\n", str(a.JoinToken))
	fmt.Fprintf(c.out, "on the new server, run (replace ADDRESS by its own address) and paste the token when asked:\n%s\n", str(a.Command))
	return nil
}

func (c *cli) remove(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError("apeloractl remove NAME [-force]")
	}
	fs := flag.NewFlagSet("remove", flag.ContinueOnError)
	force := fs.Bool("force", false, "drop the member without telling it (wipe its daemon afterwards)")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError(err.Error())
	}
	r, err := client.RemoveMember(ctx, c.gql, client.RemoveMemberInput{Name: args[0], Force: force, DryRun: c.dry(), PlanHash: c.planHash})
	if err != nil || c.dryRun {
		return c.planOr(err, r.GetRemoveMember().Plan)
	}
	fmt.Fprintf(c.out, "removed member %s from the cluster\n", args[0])
	return nil
}

func (c *cli) evacuate(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError("apeloractl evacuate NAME [-mode auto|migrate|live-migrate|stop]")
	}
	fs := flag.NewFlagSet("evacuate", flag.ContinueOnError)
	mode := fs.String("mode", "", "force this on every instance instead of its cluster.evacuate")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError(err.Error())
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

func (c *cli) printReport(r *client.AdmissionReportFields) error {
	return c.print(r, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "CHECK\tRESULT\tMESSAGE")
		for _, ch := range r.Checks {
			fmt.Fprintf(w, "%s\t%s\t%s\n", ch.Name, ch.Result, ch.Message)
		}
		fmt.Fprintf(w, "verdict:\t%s\t\n", r.Verdict)
		if r.Verdict == client.AdmissionVerdictBlocked {
			var failed []admission.Check
			for _, ch := range r.Checks {
				if ch.Result == client.CheckResultFail {
					failed = append(failed, admission.Check{Title: ch.Title, Message: ch.Message})
				}
			}
			// The words admit's refusal (and admit -dry-run) and the console use.
			fmt.Fprintln(w, admission.BlockedBy(failed))
		}
	})
}

func (c *cli) watchAdmission(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageError("apeloractl watch-admission NAME")
	}
	return follow(ctx, c, func(ws graphql.WebSocketClient) (chan client.AdmissionChecksWsResponse, error) {
		events, _, err := client.AdmissionChecks(ctx, ws, args[0])
		return events, err
	}, func(ev client.AdmissionChecksWsResponse) error {
		if ev.Errors != nil {
			return ev.Errors
		}
		e := ev.Data.AdmissionChecks
		if c.json {
			return json.NewEncoder(c.out).Encode(e)
		}
		for _, ch := range e.Checks {
			fmt.Fprintf(c.out, "%s %s %s: %s %s\n", e.At.Local().Format(time.TimeOnly), e.RunId, ch.Name, ch.Result, ch.Message)
		}
		if e.Verdict != nil {
			fmt.Fprintf(c.out, "%s %s verdict: %s\n", e.At.Local().Format(time.TimeOnly), e.RunId, *e.Verdict)
		}
		return nil
	})
}

// follow opens a websocket, subscribes with subscribe and hands every event to handle
// until the context ends, the server ends the subscription, or handle fails.
func follow[E any](ctx context.Context, c *cli, subscribe func(graphql.WebSocketClient) (chan E, error), handle func(E) error) error {
	// A websocket refused at connection_init says only 4403: ask over HTTP first, which
	// says UNAUTHENTICATED or FORBIDDEN.
	if _, err := client.Viewer(ctx, c.gql); err != nil {
		return err
	}
	ws, err := client.NewWebSocket(c.endpoint, c.token)
	if err != nil {
		return err
	}
	errs, err := ws.Start(ctx)
	if err != nil {
		return err
	}
	defer ws.Close()
	events, err := subscribe(ws)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return fmt.Errorf("subscription ended: %w", err)
		case ev, ok := <-events:
			if !ok {
				return errors.New("the server ended the subscription")
			}
			if err := handle(ev); err != nil {
				return err
			}
		}
	}
}

func (c *cli) audit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	machine := fs.String("machine", "", "only events about this machine")
	first := fs.Int("first", 20, "how many events (1–500)")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error())
	}
	var m *string
	if *machine != "" {
		m = machine
	}
	r, err := client.AuditEvents(ctx, c.gql, first, nil, m)
	if err != nil {
		return err
	}
	return c.print(r.AuditEvents, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ID\tTIME\tACTOR\tACTION\tMACHINE\tOUTCOME\tERROR")
		for _, e := range r.AuditEvents.Edges {
			n := e.Node
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Id, n.At.Local().Format(time.DateTime), n.Actor, n.Action, str(n.Machine), outcomeText(string(n.Outcome), n.Details), str(n.Error))
		}
	})
}

func (c *cli) watchAudit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("watch-audit", flag.ContinueOnError)
	machine := fs.String("machine", "", "only events about this machine")
	after := fs.String("after", "", "first the events recorded after this event id (the first field of a line), then live ones")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error())
	}
	var m, from *string
	if *machine != "" {
		m = machine
	}
	if *after != "" {
		from = after
	}
	return follow(ctx, c, func(ws graphql.WebSocketClient) (chan client.AuditEventRecordedWsResponse, error) {
		events, _, err := client.AuditEventRecorded(ctx, ws, m, from)
		return events, err
	}, func(ev client.AuditEventRecordedWsResponse) error {
		if ev.Errors != nil {
			return ev.Errors
		}
		n := ev.Data.AuditEventRecorded
		if c.json {
			return json.NewEncoder(c.out).Encode(n)
		}
		fmt.Fprintf(c.out, "%s %s %s %s %s %s %s\n", n.Id, n.At.Local().Format(time.DateTime), n.Actor, n.Action, str(n.Machine), outcomeText(string(n.Outcome), n.Details), str(n.Error))
		return nil
	})
}

// outcomeText is an event's outcome as apeloractl prints it: a step sent to Incus or MAAS
// has two events, its intent (STARTED, "the approved step") and its outcome, which names
// the intent's id; an outcome found after the process that sent the step stopped says so.
func outcomeText(outcome string, details map[string]any) string {
	switch {
	case outcome == "STARTED":
		return "STARTED (intent: sent to Incus or MAAS next)"
	case details["intent"] != nil && details["recordedBy"] == "reconciler":
		return fmt.Sprintf("%s (of intent %s, found after a restart)", outcome, eventID(details["intent"]))
	case details["intent"] != nil:
		return fmt.Sprintf("%s (of intent %s)", outcome, eventID(details["intent"]))
	}
	return outcome
}

// eventID prints an event id from an event's details (a JSON number).
func eventID(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatInt(int64(f), 10)
	}
	return fmt.Sprint(v)
}

func (c *cli) watchFleet(ctx context.Context) error {
	var last *int // the last revision printed
	return follow(ctx, c, func(ws graphql.WebSocketClient) (chan client.FleetUpdatesWsResponse, error) {
		updates, _, err := client.FleetUpdates(ctx, ws, nil)
		return updates, err
	}, func(ev client.FleetUpdatesWsResponse) error {
		if ev.Errors != nil {
			return ev.Errors
		}
		u := ev.Data.FleetUpdates
		if last != nil && !u.Snapshot && u.Revision != *last+1 {
			fmt.Fprintf(c.out, "revision %d follows %d: changes were missed\n", u.Revision, *last)
		}
		rev := u.Revision
		last = &rev
		if c.json {
			return json.NewEncoder(c.out).Encode(u)
		}
		if u.Snapshot {
			fmt.Fprintf(c.out, "revision %d: %d machines\n", u.Revision, len(u.Added))
		} else {
			fmt.Fprintf(c.out, "revision %d\n", u.Revision)
		}
		for _, m := range u.Added {
			fmt.Fprintf(c.out, "+ %s %s %s\n", m.Name, m.Phase, memberStatus(m.Member))
		}
		for _, m := range u.Changed {
			fmt.Fprintf(c.out, "~ %s %s %s\n", m.Name, m.Phase, memberStatus(m.Member))
		}
		for _, name := range u.Removed {
			fmt.Fprintf(c.out, "- %s\n", name)
		}
		if s := u.Sources; s != nil {
			fmt.Fprintf(c.out, "sources: incus %s, maas %s\n", s.Incus.Message, s.Maas.Message)
		}
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

func (c *cli) print(v any, table func(*tabwriter.Writer)) error {
	if c.json {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
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

func str(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
