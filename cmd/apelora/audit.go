package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/apelora/fabric/app"
	"github.com/apelora/fabric/auditlog"
)

// auditCommand runs `apelora audit verify|checkpoint` on the database directly.
func auditCommand(ctx context.Context, cfg app.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("audit: give a subcommand: verify or checkpoint")
	}
	switch args[0] {
	case "verify":
		return auditVerify(ctx, cfg, log, args[1:], stdout)
	case "checkpoint":
		if len(args) > 1 {
			return fmt.Errorf("unexpected arguments %q", strings.Join(args[1:], " "))
		}
		return auditCheckpoint(ctx, cfg, log, stdout)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("audit: unknown subcommand %q: use verify or checkpoint", args[0])
	}
}

// auditVerify recomputes the audit log from the rows and checks it against every
// checkpoint; any finding is an error (exit status 1) naming the first event affected.
func auditVerify(ctx context.Context, cfg app.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	vkey := fs.String("verifier-key", "", "")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("audit verify: %v (usage: apelora audit verify [--verifier-key KEY])", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", strings.Join(fs.Args(), " "))
	}
	var v note.Verifier
	if *vkey != "" {
		var err error
		if v, err = auditlog.ParseVerifierKey(*vkey); err != nil {
			return err
		}
	} else {
		path := cfg.AuditKeyPath()
		k, err := auditlog.LoadKey(path)
		if err != nil {
			return fmt.Errorf("%w: run this on a server with the audit key (%s), or give its public key with --verifier-key (the API's auditCheckpoint.verifierKey)", err, app.EnvAuditKeyFile)
		}
		v = k.Verifier
	}
	db, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	snap, err := db.Store.AuditSnapshot(ctx)
	if err != nil {
		return err
	}
	defer snap.Close()
	start := time.Now()
	rep, err := auditlog.Verify(ctx, snap, v)
	if err != nil {
		return err
	}
	if rep.Problem != nil {
		fmt.Fprintf(stdout, "checked %d events and %d checkpoints before the first problem\n", rep.Events, rep.Checkpoints)
		return fmt.Errorf("the audit log does not verify: %s", rep.Problem.Message)
	}
	fmt.Fprintf(stdout, "the audit log verifies: %d events, %d checkpoints (signed by %s), in %s\n",
		rep.Events, rep.Checkpoints, v.Name(), time.Since(start).Round(time.Millisecond))
	return nil
}

// auditCheckpoint signs a checkpoint now (when the trail grew since the latest).
func auditCheckpoint(ctx context.Context, cfg app.Config, log *slog.Logger, stdout io.Writer) error {
	k, err := app.AuditKey(cfg, log)
	if err != nil {
		return err
	}
	db, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	c, made, err := auditlog.NewService(db.Store, k).Checkpoint(ctx)
	switch {
	case err != nil:
		return err
	case c == nil:
		fmt.Fprintln(stdout, "the audit trail is empty: nothing to sign")
	case made:
		fmt.Fprintf(stdout, "signed a checkpoint of %d events:\n%s", c.Size, c.Signed)
	default:
		fmt.Fprintf(stdout, "the latest checkpoint already covers every event (%d):\n%s", c.Size, c.Signed)
	}
	return nil
}
