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
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/Khan/genqlient/graphql"

	"github.com/apelora/fabric/client"
)

const usage = `usage: apeloractl [-json] COMMAND [ARGS]

environment: APELORA_URL (default http://127.0.0.1:8080), APELORA_TOKEN (bearer token)

commands:
  whoami                          the identity the token belongs to
  machines                        every machine with its phase
  machine NAME                    one machine
  register NAME [-provisioner MANUAL|MAAS] [-description TEXT] [-maas-system-id ID]
  unregister NAME
  audit [-machine NAME] [-first N] the audit trail, newest first
  watch-audit [-machine NAME]     print audit events as they are recorded
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "apeloractl:", err)
		os.Exit(1)
	}
}

type cli struct {
	endpoint, token string
	json            bool
	out             io.Writer
	gql             graphql.Client
}

func run(ctx context.Context, args []string, out io.Writer) error {
	global := flag.NewFlagSet("apeloractl", flag.ContinueOnError)
	asJSON := global.Bool("json", false, "print JSON instead of a table")
	global.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	if err := global.Parse(args); err != nil {
		return err
	}
	args = global.Args()
	if len(args) == 0 {
		global.Usage()
		return errors.New("no command given")
	}
	base := strings.TrimSuffix(os.Getenv("APELORA_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	c := &cli{endpoint: base + "/graphql", token: os.Getenv("APELORA_TOKEN"), json: *asJSON, out: out}
	if c.token == "" {
		return errors.New("APELORA_TOKEN is not set: create a token with `apelora identity create` and export it")
	}
	c.gql = client.New(c.endpoint, c.token, nil)
	cmd, rest := args[0], args[1:]
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
			fmt.Fprintln(w, "NAME\tPHASE\tPROVISIONER\tWARNINGS")
			for _, m := range r.Machines {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Name, m.Phase, provisioner(m.Record), warnings(m.Warnings))
			}
		})
	case "machine":
		if len(rest) != 1 {
			return errors.New("usage: apeloractl machine NAME")
		}
		r, err := client.Machine(ctx, c.gql, rest[0])
		if err != nil {
			return err
		}
		if r.Machine == nil {
			return fmt.Errorf("no machine named %q", rest[0])
		}
		return c.printMachine(&r.Machine.MachineFields)
	case "register":
		return c.register(ctx, rest)
	case "unregister":
		if len(rest) != 1 {
			return errors.New("usage: apeloractl unregister NAME")
		}
		r, err := client.UnregisterMachine(ctx, c.gql, client.UnregisterMachineInput{Name: rest[0]})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "unregistered %s\n", r.UnregisterMachine.Name)
		return nil
	case "audit":
		return c.audit(ctx, rest)
	case "watch-audit":
		return c.watchAudit(ctx, rest)
	default:
		global.Usage()
		return fmt.Errorf("unknown command %q", cmd)
	}
}

func (c *cli) register(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return errors.New("usage: apeloractl register NAME [-provisioner MANUAL|MAAS] [-description TEXT] [-maas-system-id ID]")
	}
	name := args[0]
	fs := flag.NewFlagSet("register", flag.ContinueOnError)
	prov := fs.String("provisioner", "MANUAL", "MANUAL or MAAS")
	desc := fs.String("description", "", "free text")
	sysID := fs.String("maas-system-id", "", "the MAAS system id (MAAS machines)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	in := client.RegisterMachineInput{Name: name, Provisioner: client.ProvisionerKind(strings.ToUpper(*prov)), Description: desc}
	if *sysID != "" {
		in.MaasSystemId = sysID
	}
	r, err := client.RegisterMachine(ctx, c.gql, in)
	if err != nil {
		return err
	}
	return c.printMachine(&r.RegisterMachine.Machine.MachineFields)
}

func (c *cli) audit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	machine := fs.String("machine", "", "only events about this machine")
	first := fs.Int("first", 20, "how many events (1–500)")
	if err := fs.Parse(args); err != nil {
		return err
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
		fmt.Fprintln(w, "TIME\tACTOR\tACTION\tMACHINE\tOUTCOME\tERROR")
		for _, e := range r.AuditEvents.Edges {
			n := e.Node
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", n.At.Local().Format(time.DateTime), n.Actor, n.Action, str(n.Machine), n.Outcome, str(n.Error))
		}
	})
}

func (c *cli) watchAudit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("watch-audit", flag.ContinueOnError)
	machine := fs.String("machine", "", "only events about this machine")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var m *string
	if *machine != "" {
		m = machine
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
	events, _, err := client.AuditEventRecorded(ctx, ws, m)
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
			if ev.Errors != nil {
				return ev.Errors
			}
			n := ev.Data.AuditEventRecorded
			if c.json {
				_ = json.NewEncoder(c.out).Encode(n)
				continue
			}
			fmt.Fprintf(c.out, "%s %s %s %s %s %s\n", n.At.Local().Format(time.DateTime), n.Actor, n.Action, str(n.Machine), n.Outcome, str(n.Error))
		}
	}
}

func (c *cli) printMachine(m *client.MachineFields) error {
	return c.print(m, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "name:\t%s\n", m.Name)
		fmt.Fprintf(w, "phase:\t%s\n", m.Phase)
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
