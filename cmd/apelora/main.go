// Command apelora is the Apelora fabric server and its administration commands.
//
//	apelora serve                      run the API (GraphQL, GraphiQL, health endpoints)
//	apelora migrate                    apply database migrations and exit
//	apelora identity create --name N --permission P [--permission P …]
//	                                   create an identity and print its bearer token once
//	apelora env                        list the APELORA_* variables with their defaults
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/apelora/fabric/app"
	"github.com/apelora/fabric/apperr"
	"github.com/apelora/fabric/identity"
	"github.com/apelora/fabric/logging"
	"github.com/apelora/fabric/server"
)

const usage = `usage:
  apelora serve                  run the API: GraphQL at /graphql, GraphiQL at /graphiql/
  apelora migrate                apply database migrations and exit
  apelora identity create --name NAME --permission PERM [--permission PERM ...]
                                 create an identity; prints its bearer token once
                                 (PERM: view-infrastructure, manage-infrastructure, hardware.delete)
  apelora env                    list the APELORA_* variables and their defaults
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
		if len(args) < 2 || args[1] != "create" {
			fmt.Fprint(stderr, usage)
			return errors.New("identity: the only subcommand is create")
		}
		return createIdentity(ctx, cfg, log, args[2:], stdout)
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

type permissionFlags []identity.Permission

func (p *permissionFlags) String() string { return fmt.Sprint(*p) }
func (p *permissionFlags) Set(s string) error {
	perm, err := identity.ParsePermission(s)
	if err != nil {
		return errors.New(apperrMessage(err))
	}
	*p = append(*p, perm)
	return nil
}

func apperrMessage(err error) string {
	if e, ok := apperr.As(err); ok {
		return e.Message
	}
	return err.Error()
}

func createIdentity(ctx context.Context, cfg app.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("identity create", flag.ContinueOnError)
	name := fs.String("name", "", "the identity's name (lower-case letters, digits, '.', '_', '-')")
	var perms permissionFlags
	fs.Var(&perms, "permission", "a permission to grant; repeat for several")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", strings.Join(fs.Args(), " "))
	}
	db, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	id, token, err := identity.Create(ctx, db.Store, *name, perms)
	if err != nil {
		return errors.New(apperrMessage(err))
	}
	fmt.Fprintf(stdout, "created identity %q with %v\n", id.Name, id.Permissions)
	fmt.Fprintln(stdout, "its bearer token, shown only now (Apelora keeps only a hash):")
	fmt.Fprintln(stdout, token)
	return nil
}
