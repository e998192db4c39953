// Command apelora-worker fences dead Incus members: it is the only Apelora process with
// MAAS power rights (its own APELORA_MAAS_API_KEY). Run two or more: one holds the fence
// lock in PostgreSQL and acts, the others stand by and take over when it dies.
//
//	apelora-worker          run (reads the APELORA_* variables; see `apelora-worker env`)
//	apelora-worker env      list the variables it reads, with their defaults
//	apelora-worker version  print the version and the commit it was built from
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/apelora/fabric/adapters/metrics"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/internal/buildinfo"
	"github.com/apelora/fabric/internal/logging"
)

const usage = `usage:
  apelora-worker          watch the Incus members and power dead ones off through MAAS
  apelora-worker env      list the variables it reads and their defaults
  apelora-worker version  print the version and the commit it was built from
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "apelora-worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "run"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "run":
	case "env":
		for _, v := range app.Variables() {
			if app.WorkerReads(v.Name) {
				fmt.Fprintf(stdout, "%-30s %-28s %s\n", v.Name, v.Default, v.Meaning)
			}
		}
		for _, v := range app.WorkerVariables() {
			fmt.Fprintf(stdout, "%-30s %-28s %s\n", v.Name, v.Default, v.Meaning)
		}
		return nil
	case "version":
		fmt.Fprintln(stdout, buildinfo.Read().Line("apelora-worker"))
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	cfg, err := app.WorkerConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	log := logging.New(stderr, cfg.LogLevel)
	if cfg.Metrics, err = app.StartMetrics(ctx, cfg.Monitoring, metrics.Worker, log); err != nil {
		return err
	}
	db, err := app.OpenDatabase(ctx, cfg.Config, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := app.SealWorkerAudit(cfg.Config, db.Store, log); err != nil {
		return err
	}
	err = app.RunWorker(ctx, cfg, db.Store, log)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	log.Info("apelora-worker stopped", "worker", cfg.Name)
	return err
}
