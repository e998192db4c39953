package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/apelora/fabric/adapters/auditsink"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/auditexport"
	"github.com/apelora/fabric/domain/auditlog"
)

// The audit export's settings: its sinks and how often the exporter looks for events. The
// exporter runs in the API replicas, as drift and the checkpoints do: it needs only the
// database, and the worker (which holds the MAAS power key) stays as small as fencing
// needs. One replica exports to a sink at a time (a lock per sink).
const (
	EnvAuditSyslogAddr          = "APELORA_AUDIT_SYSLOG_ADDR"
	EnvAuditSyslogTLS           = "APELORA_AUDIT_SYSLOG_TLS"
	EnvAuditSyslogTLSCA         = "APELORA_AUDIT_SYSLOG_TLS_CA"
	EnvAuditSyslogTLSServerName = "APELORA_AUDIT_SYSLOG_TLS_SERVER_NAME"
	EnvAuditJSONLFile           = "APELORA_AUDIT_JSONL_FILE"
	EnvAuditExportInterval      = "APELORA_AUDIT_EXPORT_INTERVAL"
)

// AuditExport is the export's configuration; zero exports nothing.
type AuditExport struct {
	SyslogAddr       string // host:port; "" : no syslog sink
	SyslogTLS        bool
	SyslogCA         string // PEM file; "" : the system trust store
	SyslogServerName string // "" : the address's host
	JSONLFile        string // "" : no file sink
	Interval         time.Duration
}

// AuditExportVariables documents the export's variables.
func AuditExportVariables() []Variable {
	return []Variable{
		{EnvAuditSyslogAddr, "(none: no syslog export)", "host:port of a syslog receiver (rsyslog imtcp, a SIEM) that gets every audit event as RFC 5424 over TCP, octet-counted (RFC 6587), with its leaf index, leaf hash and the latest checkpoint; delivered at least once, in order, resuming after outages and restarts"},
		{EnvAuditSyslogTLS, "off", "on: syslog over TLS (the receiver's certificate checked against " + EnvAuditSyslogTLSCA + " or the system trust store)"},
		{EnvAuditSyslogTLSCA, "(system trust store)", "PEM file with the CA the syslog receiver's certificate must chain to; setting it turns TLS on"},
		{EnvAuditSyslogTLSServerName, "(the address's host)", "name the syslog receiver's certificate must carry"},
		{EnvAuditJSONLFile, "(none: no file export)", "absolute path of a file every audit event is appended to as a JSON line (same fields as syslog's), synced before it counts as delivered; `apelora audit verify --export FILE` checks it"},
		{EnvAuditExportInterval, durationText(auditexport.DefaultInterval), "how often the exporter looks for new audit events (100ms to 1m); a sink that is down is tried again after one interval, then twice as long each time up to 5 intervals (at least 1s, at most 30s)"},
	}
}

func auditExportSettings(get func(string, string) string, c *Config) error {
	x := AuditExport{
		SyslogAddr:       get(EnvAuditSyslogAddr, ""),
		SyslogCA:         get(EnvAuditSyslogTLSCA, ""),
		SyslogServerName: get(EnvAuditSyslogTLSServerName, ""),
		JSONLFile:        get(EnvAuditJSONLFile, ""),
	}
	if x.SyslogAddr != "" {
		if _, _, err := net.SplitHostPort(x.SyslogAddr); err != nil {
			return fmt.Errorf("%s=%q: give the receiver as host:port, such as siem.example:6514", EnvAuditSyslogAddr, x.SyslogAddr)
		}
	}
	switch v := get(EnvAuditSyslogTLS, "off"); v {
	case "on":
		x.SyslogTLS = true
	case "off":
		x.SyslogTLS = x.SyslogCA != ""
	default:
		return fmt.Errorf("%s=%q: use on or off", EnvAuditSyslogTLS, v)
	}
	if x.JSONLFile != "" && !filepath.IsAbs(x.JSONLFile) {
		return fmt.Errorf("%s=%q: give an absolute path", EnvAuditJSONLFile, x.JSONLFile)
	}
	var err error
	x.Interval, err = boundedDuration(EnvAuditExportInterval, get(EnvAuditExportInterval, auditexport.DefaultInterval.String()),
		100*time.Millisecond, time.Minute, auditexport.DefaultInterval, "how often the audit exporter looks for new events")
	c.AuditExport = x
	return err
}

// sinks makes the configured sinks.
func (x AuditExport) sinks() ([]auditexport.Sink, error) {
	var out []auditexport.Sink
	if x.SyslogAddr != "" {
		s := &auditsink.Syslog{Addr: x.SyslogAddr}
		if x.SyslogTLS {
			var err error
			if s.TLS, err = auditsink.SyslogTLS(x.SyslogAddr, x.SyslogCA, x.SyslogServerName); err != nil {
				return nil, fmt.Errorf("%w (%s)", err, EnvAuditSyslogTLSCA)
			}
		}
		out = append(out, s)
	}
	if x.JSONLFile != "" {
		out = append(out, &auditsink.JSONL{Path: x.JSONLFile})
	}
	return out, nil
}

// startAuditExport runs one exporter per configured sink on this replica until ctx ends;
// each leads its sink when no other replica does.
func startAuditExport(ctx context.Context, cfg Config, store *postgres.Store, trail *auditlog.Service, log *slog.Logger) error {
	sinks, err := cfg.AuditExport.sinks()
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	for _, s := range sinks {
		var obs auditexport.Observer
		if cfg.Metrics != nil {
			obs = cfg.Metrics
		}
		e := &auditexport.Exporter{
			Trail: exportTrail{store, trail}, Sink: s, Observer: obs,
			Leadership: store.AuditExportLeadership(fmt.Sprintf("apelora audit export %s-%d", host, os.Getpid()), cfg.leaderLease()),
			Interval:   cfg.AuditExport.Interval, Lease: cfg.leaderLease(), Log: log,
		}
		go e.Run(ctx)
	}
	return nil
}

// exportTrail is the trail as the exporter reads it: the store's leaves, and the latest
// checkpoint the audit key verifies (a row someone else put in the database is never
// exported as a checkpoint).
type exportTrail struct {
	*postgres.Store
	log *auditlog.Service
}

func (t exportTrail) LatestAuditCheckpoint(ctx context.Context) (*auditlog.Checkpoint, error) {
	return t.log.Latest(ctx)
}
