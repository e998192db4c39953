// Command apeloractl is a small command-line client for the Apelora fabric API, built on
// the generated Go client (package client) so automation and people use the same calls.
//
//	APELORA_URL=http://127.0.0.1:8080 APELORA_TOKEN=apl_… apeloractl machines
//
// Its commands are declared one file per resource (commands.go lists them); every change
// takes -dry-run and -plan-hash the same way (change.go).
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
)

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
	base, endpoint, token string
	json                  bool
	dryRun                bool    // -dry-run: ask for the plan only
	planHash              *string // -plan-hash: the plan this change confirms
	out                   io.Writer
	gql                   graphql.Client
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
		return usageError(flagProblem(global, err, nil) + " (apeloractl help lists the commands and their flags)")
	}
	args = global.Args()
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return usageError("no command given")
	}
	// Before the token: a command apeloractl does not have, help and version need no API.
	top := commandNamed(args[0])
	if top == nil {
		return unknownCommand(args[0])
	}
	if slices.ContainsFunc(args[1:], func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		return helpAsked(top.help())
	}
	if top == helpCommand {
		return helpAsked(strings.TrimSuffix(usage, "\n"))
	}
	base := baseURL()
	c := &cli{base: base, endpoint: base + "/graphql", json: *asJSON, out: out}
	rest := args[1:]
	if !top.offline {
		c.connect()
		rest, c.dryRun = takeDryRun(rest)
		var err error
		if rest, c.planHash, err = takePlanHash(rest); err != nil {
			return err
		}
	}
	cmd, rest, err := top.sub(rest)
	if err != nil {
		return err
	}
	if c.dryRun && !cmd.takesDryRun() {
		return readOnly(top, cmd)
	}
	if c.planHash != nil && (c.dryRun || cmd.mutation == "") {
		return usageError("-plan-hash confirms the plan a -dry-run printed: give it instead of -dry-run, to a command that changes something")
	}
	runCmd, names, err := cmd.parse(top, rest)
	if err != nil {
		return err
	}
	return runCmd(c, ctx, names)
}

// connect makes the API client, with APELORA_TOKEN or the session `apeloractl login` kept.
func (c *cli) connect() {
	c.token = os.Getenv("APELORA_TOKEN")
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
}
