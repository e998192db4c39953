// Command apelora is the Apelora fabric server and its administration commands.
//
//	apelora serve                      run the API (GraphQL, GraphiQL, health endpoints)
//	apelora migrate                    apply database migrations and exit
//	apelora identity create --name N --permission P [--permission P …] [--grant P@CLUSTER …] [--expires WHEN]
//	                                   create an identity and print its bearer token once
//	apelora identity list              list identities (never their tokens)
//	apelora identity revoke NAME       revoke an identity at once
//	apelora audit verify [--verifier-key KEY] [--witness-export FILE[,MORE…]] [--export FILE [MORE…]]
//	                                   recompute the audit log and check every seal, every
//	                                   checkpoint and the heads this host witnessed (of the
//	                                   database, or of an exported file)
//	apelora audit checkpoint           sign an audit checkpoint now
//	apelora env                        list the APELORA_* variables with their defaults
//	apelora version                    print the version and the commit it was built from
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/apelora/fabric/adapters/metrics"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/internal/buildinfo"
	"github.com/apelora/fabric/internal/logging"
	"github.com/apelora/fabric/internal/server"
)

const usage = `usage:
  apelora serve                  run the API: GraphQL at /graphql, GraphiQL at /graphiql/
  apelora migrate                apply database migrations and exit
  apelora identity create --name NAME --permission PERM [--permission PERM ...] [--grant PERM@CLUSTER ...] [--expires WHEN]
                                 create an identity; prints its bearer token once
                                 (PERM: view-infrastructure, manage-infrastructure, hardware.delete;
                                 PERM@CLUSTER: manage-infrastructure or hardware.delete in that
                                 registered cluster only;
                                 WHEN: a duration such as 90d or 12h, or an RFC 3339 time)
  apelora identity list          every identity: permissions, status, last use, expiry (no tokens)
  apelora identity revoke NAME   revoke an identity at once (also the last manager: this is
                                 the way back when the API has none)
  apelora audit verify [--verifier-key KEY] [--witness-export FILE[,MORE…]]
                                 recompute the audit log from the events and check every event's
                                 seal, every signed checkpoint, and that the trail holds every tree
                                 head this host's replica witnessed (APELORA_STATE_DIR) and the SIEM
                                 export given saw; fails naming the first event changed, removed,
                                 added or moved, or the tail cut off (KEY: the public key, when this
                                 host has no audit key: seals are then not checked);
                                 with --export FILE [MORE…], checks a SIEM export instead (a JSON
                                 Lines file, or the lines rsyslog wrote; rotated files oldest first)
                                 without the database: leaves in order from 0, each line's leaf
                                 hash, every checkpoint it carries
  apelora audit checkpoint       sign an audit checkpoint now (when the trail grew)
  apelora env                    list the APELORA_* variables and their defaults
  apelora version                print the version and the commit it was built from
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "apelora:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	// Before the configuration: a version answers on a host not yet configured.
	if args[0] == "version" {
		fmt.Fprintln(stdout, buildinfo.Read().Line("apelora"))
		return nil
	}
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	log := logging.New(stderr, cfg.LogLevel)
	switch args[0] {
	case "serve":
		return serve(ctx, cfg, log)
	case "migrate":
		db, err := app.OpenDatabase(ctx, cfg, log)
		if err != nil {
			return err
		}
		db.Close()
		fmt.Fprintln(stdout, "database is up to date")
		return nil
	case "identity":
		return identityCommand(ctx, cfg, log, args[1:], stdout, stderr)
	case "audit":
		return auditCommand(ctx, cfg, log, args[1:], stdout, stderr)
	case "env":
		for _, v := range app.Variables() {
			fmt.Fprintf(stdout, "%-28s %-26s %s\n", v.Name, v.Default, v.Meaning)
		}
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func serve(ctx context.Context, cfg app.Config, log *slog.Logger) error {
	var err error
	if cfg.Metrics, err = app.StartMetrics(ctx, cfg.Monitoring, metrics.Server, log); err != nil {
		return err
	}
	db, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	product, err := app.Build(ctx, cfg, db.Store, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on APELORA_LISTEN=%s: %w", cfg.Listen, err)
	}
	log.Info("apelora serving", "graphql", "http://"+ln.Addr().String()+"/graphql", "graphiql", "http://"+ln.Addr().String()+"/graphiql/")
	return server.Serve(ctx, ln, product.Handler, cfg.ShutdownGrace, log)
}
