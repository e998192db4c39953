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

	"github.com/apelora/fabric/domain/auditexport"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/internal/apperr"
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

// auditVerify recomputes the audit log from the rows and checks every seal and checkpoint,
// and the heads witnessed outside the database; any finding is an error (exit status 1)
// naming the first event affected.
func auditVerify(ctx context.Context, cfg app.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	vkey := fs.String("verifier-key", "", "")
	export := fs.String("export", "", "")
	witnessExport := fs.String("witness-export", "", "")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("audit verify: %v (usage: apelora audit verify [--verifier-key KEY] [--witness-export FILE[,MORE…]] [--export FILE [MORE_FILES…]])", err)
	}
	if fs.NArg() > 0 && *export == "" {
		return fmt.Errorf("unexpected arguments %q", strings.Join(fs.Args(), " "))
	}
	o := auditlog.VerifyOptions{}
	if *vkey != "" {
		var err error
		if o.Verifier, err = auditlog.ParseVerifierKey(*vkey); err != nil {
			return err
		}
	} else {
		path := cfg.AuditKeyPath()
		k, err := auditlog.LoadKey(path)
		if err != nil {
			return fmt.Errorf("%w: run this on a server with the audit key (%s), or give its public key with --verifier-key (the API's auditCheckpoint.verifierKey)", err, app.EnvAuditKeyFile)
		}
		o.Verifier, o.Sealer = k.Verifier, k.Sealer
	}
	if *export != "" {
		return verifyExport(append([]string{*export}, fs.Args()...), o.Verifier, stdout)
	}
	// The heads witnessed outside the database: this host's replica's, and an export's.
	var sources []string
	if path := cfg.AuditWitnessPath(); path != "" {
		w, err := auditlog.OpenWitness(path)
		if err != nil {
			return err
		}
		if heads := w.Heads(); len(heads) > 0 {
			o.Witnessed = append(o.Witnessed, heads...)
			sources = append(sources, path)
		}
	}
	if *witnessExport != "" {
		files := strings.Split(*witnessExport, ",")
		heads, err := exportHeads(files, o.Verifier)
		if err != nil {
			return err
		}
		o.Witnessed = append(o.Witnessed, heads...)
		sources = append(sources, strings.Join(files, " + "))
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
	rep, err := auditlog.Verify(ctx, snap, o)
	if err != nil {
		return err
	}
	if rep.Problem != nil {
		fmt.Fprintf(stdout, "checked %d events (%d seals) and %d checkpoints before the first problem\n", rep.Events, rep.Sealed, rep.Checkpoints)
		return fmt.Errorf("the audit log does not verify: %s", rep.Problem.Message)
	}
	fmt.Fprintf(stdout, "the audit log verifies: %d events, %d checkpoints (signed by %s), in %s",
		rep.Events, rep.Checkpoints, o.Verifier.Name(), time.Since(start).Round(time.Millisecond))
	if o.Sealer != nil {
		fmt.Fprintf(stdout, "; every event's seal checked, the newest included")
	} else {
		fmt.Fprintf(stdout, "; seals not checked (no audit key here: run on a server to check them), so the events after the latest checkpoint are chained but not proven")
	}
	if len(sources) > 0 {
		fmt.Fprintf(stdout, "; the trail holds the %d tree heads witnessed outside the database (%s)", rep.Witnessed, strings.Join(sources, ", "))
	} else {
		fmt.Fprintf(stdout, "; no head witnessed outside the database to compare with (no witness in APELORA_STATE_DIR, no --witness-export): a trail cut short at its end is not detected")
	}
	fmt.Fprintln(stdout)
	return nil
}

// exportHeads reads a SIEM export (files oldest first) and returns the tree heads it
// witnessed; an export that does not verify is an error.
func exportHeads(paths []string, v note.Verifier) ([]auditlog.Witnessed, error) {
	var readers []io.Reader
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("open the export to compare with: %w", err)
		}
		defer f.Close()
		readers = append(readers, f)
	}
	rep, err := auditexport.VerifyExport(io.MultiReader(readers...), v)
	if err != nil {
		return nil, err
	}
	name := "the export " + strings.Join(paths, " + ")
	if rep.Problem != nil {
		return nil, fmt.Errorf("%s does not verify, so it cannot witness the trail: %s", name, rep.Problem.Message)
	}
	var out []auditlog.Witnessed
	for _, h := range rep.Heads {
		out = append(out, auditlog.Witnessed{Head: h, By: name})
	}
	return out, nil
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

// auditCheckpoint signs a checkpoint now (when the trail grew), as the server's own
// checkpointer would: never over a tree that is not sealed, or that does not extend the
// latest checkpoint and the heads this host witnessed. On a trail never sealed (recorded
// before migration 0020), it seals it first.
func auditCheckpoint(ctx context.Context, cfg app.Config, log *slog.Logger, stdout io.Writer) error {
	k, err := app.AuditKey(cfg, log)
	if err != nil {
		return err
	}
	w, err := auditlog.OpenWitness(cfg.AuditWitnessPath())
	if err != nil {
		return err
	}
	db, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if len(w.Heads()) == 0 {
		n, err := db.Store.SealAuditBacklog(ctx, k.Sealer)
		if err != nil {
			return err
		}
		if n > 0 {
			fmt.Fprintf(stdout, "sealed the %d audit events recorded before sealing\n", n)
		}
	}
	c, made, err := auditlog.NewService(db.Store, k, auditlog.Options{Witness: w, Log: log}).Checkpoint(ctx)
	switch {
	case err != nil:
		return errors.New(apperr.Text(err))
	case c == nil:
		fmt.Fprintln(stdout, "nothing to sign: the audit trail is empty, or this host signed its tree already (and the checkpoint is missing from the database: run `apelora audit verify`)")
	case made:
		fmt.Fprintf(stdout, "signed a checkpoint of %d events:\n%s", c.Size, c.Signed)
	default:
		fmt.Fprintf(stdout, "the latest checkpoint already covers every event (%d):\n%s", c.Size, c.Signed)
	}
	return nil
}
