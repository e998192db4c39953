package app

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/auditlog"
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
		{EnvAuditKeyFile, "APELORA_STATE_DIR/" + auditlog.KeyFile, "file holding the Ed25519 key audit checkpoints are signed with (made, mode 0600, on first start when missing); give every replica the same file"},
		{EnvAuditCheckpointInterval, durationText(auditlog.DefaultCheckpointInterval), "how often a signed audit checkpoint is written when the trail grew (1s to 24h); `apelora audit checkpoint` writes one at once"},
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
// no state folder (tests) signs with a key of this process's own.
func AuditKey(cfg Config, log *slog.Logger) (*auditlog.Key, error) {
	path := cfg.AuditKeyPath()
	if path == "" {
		skey, _, err := note.GenerateKey(rand.Reader, auditlog.KeyName)
		if err != nil {
			return nil, err
		}
		log.Warn("no APELORA_STATE_DIR or " + EnvAuditKeyFile + ": audit checkpoints are signed with a key that ends with this process")
		return auditlog.KeyFromText(skey)
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

// startAuditLog opens the audit log and signs its checkpoints on the interval.
func startAuditLog(ctx context.Context, cfg Config, store *postgres.Store, log *slog.Logger) (*auditlog.Service, error) {
	k, err := AuditKey(cfg, log)
	if err != nil {
		return nil, err
	}
	svc := auditlog.NewService(store, k)
	interval := cfg.AuditCheckpointInterval
	if interval <= 0 {
		interval = auditlog.DefaultCheckpointInterval
	}
	go svc.RunCheckpoints(ctx, interval, log)
	return svc, nil
}
