package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/apelora/fabric/app"
	"github.com/apelora/fabric/auditexport"
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
	export := fs.String("export", "", "")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("audit verify: %v (usage: apelora audit verify [--verifier-key KEY] [--export FILE [MORE_FILES…]])", err)
	}
	if fs.NArg() > 0 && *export == "" {
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
	if *export != "" {
		return verifyExport(append([]string{*export}, fs.Args()...), v, stdout)
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

// verifyExport checks an export (APELORA_AUDIT_JSONL_FILE, or the file a syslog receiver
// wrote) without the database: the chain of leaf hashes from leaf 0 and every checkpoint
// the lines carry. Files rotated away are given oldest first, read as one (lines are
// numbered across them).
func verifyExport(paths []string, v note.Verifier, stdout io.Writer) error {
	var readers []io.Reader
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("open the export to verify: %w", err)
		}
		defer f.Close()
		readers = append(readers, f)
	}
	path := strings.Join(paths, " + ")
	f := io.MultiReader(readers...)
	rep, err := auditexport.VerifyExport(f, v)
	if err != nil {
		return err
	}
	if rep.Problem != nil {
		fmt.Fprintf(stdout, "read %d lines, %d events in order before the first problem; verified up to checkpoint %d\n", rep.Lines, rep.Events, rep.Verified)
		return fmt.Errorf("the export %s does not verify: %s", path, rep.Problem.Message)
	}
	fmt.Fprintf(stdout, "the export verifies: %d events (leaves 0 to %d) in %d lines (%d repeated deliveries), verified up to checkpoint %d by %d checkpoints signed by %s",
		rep.Events, rep.Events-1, rep.Lines, rep.Duplicates, rep.Verified, rep.Checkpoints, v.Name())
	if rest := rep.Events - rep.Verified; rest > 0 {
		fmt.Fprintf(stdout, "; the last %d events are chained but no checkpoint in the export covers them yet", rest)
	}
	fmt.Fprintln(stdout)
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
