package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/server"
)

// The audit log's settings: where its signing key is, and how often it signs.
const (
	EnvAuditKeyFile            = "APELORA_AUDIT_KEY_FILE"
	EnvAuditCheckpointInterval = "APELORA_AUDIT_CHECKPOINT_INTERVAL"
	maxAuditCheckpointInterval = 24 * time.Hour
)

// AuditVariables documents the audit log's variables.
func AuditVariables() []Variable {
	return []Variable{
		{EnvAuditKeyFile, "APELORA_STATE_DIR/" + auditlog.KeyFile, "file holding the Ed25519 key audit checkpoints are signed with, and every audit event sealed with (made, mode 0600, on first start when missing); give every replica the same file, and apelora-worker a copy when it drives rolling reboots; back it up"},
		{EnvAuditCheckpointInterval, durationText(auditlog.DefaultCheckpointInterval), "how often the audit trail is checked (a problem is raised within one interval) and a signed audit checkpoint is written when the trail grew (1s to 24h); `apelora audit checkpoint` writes one at once"},
	}
}

func auditSettings(get func(string, string) string, c *Config) (err error) {
	c.AuditKeyFile = get(EnvAuditKeyFile, "")
	c.AuditCheckpointInterval, err = boundedDuration(EnvAuditCheckpointInterval,
		get(EnvAuditCheckpointInterval, auditlog.DefaultCheckpointInterval.String()),
		time.Second, maxAuditCheckpointInterval, auditlog.DefaultCheckpointInterval, "how often the audit log signs a checkpoint")
	return err
}

// AuditKeyPath is the signing key's file: APELORA_AUDIT_KEY_FILE, else in the state
// folder; "" for a Config built in code with neither.
func (c Config) AuditKeyPath() string {
	if c.AuditKeyFile != "" {
		return c.AuditKeyFile
	}
	if c.StateDir != "" {
		return filepath.Join(c.StateDir, auditlog.KeyFile)
	}
	return ""
}

// AuditKey loads the signing key, making it on first start. A Config built in code with
// no state folder (tests) signs with the process's own key (auditlog.EphemeralKey), the
// same for every replica the process runs.
func AuditKey(cfg Config, log *slog.Logger) (*auditlog.Key, error) {
	path := cfg.AuditKeyPath()
	if path == "" {
		log.Warn("no APELORA_STATE_DIR or " + EnvAuditKeyFile + ": audit events are sealed and checkpoints signed with a key that ends with this process")
		return auditlog.EphemeralKey()
	}
	k, made, err := auditlog.LoadOrCreateKey(path)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, EnvAuditKeyFile)
	}
	if made {
		log.Info("made the audit signing key: back it up, and give every replica the same file ("+EnvAuditKeyFile+")", "file", path, "verifier_key", k.VerifierKey)
	}
	return k, nil
}

// SealAudit has store seal the audit events it appends with the audit key (made on first
// use): what a command on a server that records events (`apelora identity`) does.
func SealAudit(cfg Config, store *postgres.Store, log *slog.Logger) error {
	k, err := AuditKey(cfg, log)
	if err != nil {
		return err
	}
	store.SealAuditWith(k.Sealer)
	return nil
}

// SealWorkerAudit has the worker's store seal the events it appends (rolling reboot steps)
// with the servers' audit key, when this host has it (APELORA_AUDIT_KEY_FILE, or the state
// folder's file): never made here. Without it the worker still fences (fence events are no
// audit events) but drives no rolling reboot (RunWorker).
func SealWorkerAudit(cfg Config, store *postgres.Store, log *slog.Logger) error {
	path := cfg.AuditKeyPath()
	if path == "" {
		k, err := auditlog.EphemeralKey()
		if err != nil {
			return err
		}
		store.SealAuditWith(k.Sealer)
		return nil
	}
	k, err := auditlog.LoadKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		log.Warn("no audit key on this host: the worker fences, but drives no rolling reboot, since it cannot record a step in the audit trail; give it the servers' key file ("+EnvAuditKeyFile+")", "file", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w (%s)", err, EnvAuditKeyFile)
	}
	store.SealAuditWith(k.Sealer)
	return nil
}

// AuditWitnessPath is this replica's audit witness file in its state folder ("" : kept in
// memory, for a Config built in code with no state folder).
func (c Config) AuditWitnessPath() string {
	if c.StateDir == "" {
		return ""
	}
	return filepath.Join(c.StateDir, auditlog.WitnessFile)
}

// startAuditLog seals every event the store appends with the audit key, keeps this
// replica's witness of the tree in its state folder, seals the events recorded before
// sealing existed (once, on a trail never sealed and a replica that witnessed nothing),
// and checks the trail and signs its checkpoints every interval.
func startAuditLog(ctx context.Context, cfg Config, store *postgres.Store, log *slog.Logger) (*auditlog.Service, error) {
	k, err := AuditKey(cfg, log)
	if err != nil {
		return nil, err
	}
	store.SealAuditWith(k.Sealer)
	witness, err := auditlog.OpenWitness(cfg.AuditWitnessPath())
	if err != nil {
		return nil, err
	}
	go witness.Run(ctx, func(err error) { log.Error("could not keep this replica's audit witness", "error", err) })
	store.OnAuditAppended(witness.Appended)
	var obs auditlog.Observer
	if cfg.Metrics != nil {
		obs = cfg.Metrics
	}
	svc := auditlog.NewService(store, k, auditlog.Options{Witness: witness, Log: log, Observer: obs})
	if len(witness.Heads()) == 0 {
		switch n, err := store.SealAuditBacklog(ctx, k.Sealer); {
		case err != nil:
			log.Error("could not seal the audit events recorded before sealing", "error", apperr.Text(err))
		case n > 0:
			log.Info("sealed the audit events recorded before sealing (migration 0020)", "events", n)
		}
	}
	interval := cfg.AuditCheckpointInterval
	if interval <= 0 {
		interval = auditlog.DefaultCheckpointInterval
	}
	go svc.RunCheckpoints(ctx, interval)
	return svc, nil
}

// auditAppendCheck refuses a mutation while the stored audit tree cannot take its event,
// saying what is wrong and what to run. It asks the database only while the latest append
// or check of this process found the tree damaged, so a mutation pays nothing otherwise.
func auditAppendCheck(store *postgres.Store, svc *auditlog.Service) server.MutationCheck {
	return func(ctx context.Context) error {
		if store.AuditAppendDamage() == nil {
			return nil
		}
		return svc.Appendable(ctx)
	}
}
