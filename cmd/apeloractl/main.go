// Command apeloractl is a small command-line client for the Apelora fabric API, built on
// the generated Go client (package client) so automation and people use the same calls.
//
//	APELORA_URL=http://127.0.0.1:8080 APELORA_TOKEN=apl_… apeloractl machines
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/Khan/genqlient/graphql"

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
  help                            this text

-dry-run, after any command that changes something (register, unregister, approve, revoke,
admit, remove, evacuate, restore, rolling-reboot start|pause|resume|cancel, commission,
install, hardware-test, release, bulk, create-identity, revoke-identity, placement-guard
on|off), changes nothing and prints the plan: the steps it would take in Incus, MAAS
and the database, and what would refuse or qualify it. A plan that would be refused
exits as the call would (the refusal's code). It issues no token and is no audit event.
Its last line is the plan's hash: run the same command again with -plan-hash HASH instead
of -dry-run to make the change only while its plan is still that one (else PLAN_CHANGED:
nothing changed, look again). Without -plan-hash the audit event says no plan was shown.

A mistyped command or flag, and a flag a command does not take, are usage errors (exit
status 2) that name the nearest command or flag. A server that cannot be reached is
UNAVAILABLE: cannot reach APELORA_URL (its address and why): is apelora serve running?

errors are printed as CODE: message (the API's extensions.code). exit status:
  0 done   1 any other error   2 usage   3 UNAUTHENTICATED (no or wrong token)
  4 FORBIDDEN (the identity lacks a permission)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	var help helpAsked
	if errors.As(err, &help) {
		fmt.Fprintln(os.Stdout, help)
		os.Exit(0)
	}
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
	return explain(baseURL(), runCommand(ctx, args, out))
}

func runCommand(ctx context.Context, args []string, out io.Writer) error {
	global := newFlags("apeloractl")
	asJSON := global.Bool("json", false, "print JSON instead of a table")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpAsked(strings.TrimSuffix(usage, "\n"))
		}
		return usageError(flagProblem(global, err) + " (apeloractl help lists the commands and their flags)")
	}
	args = global.Args()
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return usageError("no command given")
	}
	// Before the token: a command apeloractl does not have, help and version need no API.
	if !slices.Contains(commands, args[0]) {
		return unknownCommand(args[0])
	}
	if slices.ContainsFunc(args[1:], func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		return helpAsked(commandHelp(args[0]))
	}
	switch args[0] {
	case "help":
		return helpAsked(strings.TrimSuffix(usage, "\n"))
	case "version":
		if err := noFlags("version", args[1:], 0, "apeloractl version"); err != nil {
			return err
		}
		fmt.Fprintln(out, buildinfo.Read().Line("apeloractl"))
		return nil
	}
	base := baseURL()
	switch args[0] {
	case "login":
		if err := noFlags("login", args[1:], 0, "apeloractl login"); err != nil {
			return err
		}
		return login(ctx, base, out)
	case "logout":
		if err := noFlags("logout", args[1:], 0, "apeloractl logout"); err != nil {
			return err
		}
		return logout(ctx, base, out)
	}
	c := &cli{endpoint: base + "/graphql", token: os.Getenv("APELORA_TOKEN"), json: *asJSON, out: out}
	if c.token == "" {
		c.token = savedSession() // from `apeloractl login`
	}
	var httpClient *http.Client
	if c.token == "" {
		// Refused at the first request, not here: a command's usage errors (and -h) come
		// first, and need no token.
		httpClient = &http.Client{Transport: noToken{}}
	}
	c.gql = client.New(c.endpoint, c.token, httpClient)
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
	// Commands that take names only (or nothing): a flag or an extra name is a usage
	// error, never ignored.
	if use, ok := namesOnly[cmd]; ok {
		if err := noFlags(cmd, rest, use.max, use.line); err != nil {
			return err
		}
	}
	switch cmd {
	case "whoami":
		return c.whoami(ctx)
	case "machines":
		return c.machines(ctx)
	case "machine":
		return c.machine(ctx, rest)
	case "register":
		return c.register(ctx, rest)
	case "unregister":
		return c.unregister(ctx, rest)
	case "approve":
		return c.approve(ctx, rest)
	case "revoke":
		return c.revoke(ctx, rest)
	case "report":
		return c.report(ctx, rest)
	case "admit":
		return c.admit(ctx, rest)
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
		return unknownCommand(cmd)
	}
}

// namesOnly are the commands without flags of their own (-dry-run and -plan-hash
// aside): the usage line and how many names each takes at most (-1: any number).
var namesOnly = map[string]struct {
	max  int
	line string
}{
	"whoami":          {0, "apeloractl whoami"},
	"machines":        {0, "apeloractl machines"},
	"machine":         {1, "apeloractl machine NAME"},
	"unregister":      {1, "apeloractl unregister NAME"},
	"revoke":          {1, "apeloractl revoke NAME"},
	"report":          {1, "apeloractl report NAME"},
	"admit":           {1, "apeloractl admit NAME"},
	"restore":         {1, "apeloractl restore NAME"},
	"rolling-reboot":  {-1, rollingUsage},
	"watch-admission": {1, "apeloractl watch-admission NAME"},
	"fleet":           {0, "apeloractl fleet"},
	"watch-fleet":     {0, "apeloractl watch-fleet"},
	"identities":      {0, "apeloractl identities"},
	"revoke-identity": {1, "apeloractl revoke-identity NAME"},
	"placement-guard": {1, "apeloractl placement-guard [on|off]"},
}
