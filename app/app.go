package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/localpg"
	"github.com/apelora/fabric/admission"
	"github.com/apelora/fabric/drift"
	"github.com/apelora/fabric/enrolment"
	"github.com/apelora/fabric/fencing"
	"github.com/apelora/fabric/fleet"
	"github.com/apelora/fabric/hardware"
	"github.com/apelora/fabric/identity"
	"github.com/apelora/fabric/machines"
	"github.com/apelora/fabric/membership"
	"github.com/apelora/fabric/provisioning"
	"github.com/apelora/fabric/resolvers"
	"github.com/apelora/fabric/scripts"
	"github.com/apelora/fabric/server"
)

// Database is an open, migrated database, and the local PostgreSQL behind it if Apelora
// started one.
type Database struct {
	Store *postgres.Store
	local *localpg.Server
}

// OpenDatabase connects to APELORA_DATABASE_URL, or starts (or reuses) the local
// PostgreSQL in the state folder when none is set, and applies the migrations.
func OpenDatabase(ctx context.Context, cfg Config, log *slog.Logger) (*Database, error) {
	db := &Database{}
	url := cfg.DatabaseURL
	if url == "" {
		local, err := localpg.New(filepath.Join(cfg.StateDir, "postgres"))
		if err != nil {
			return nil, err
		}
		if err := local.Start(ctx, "apelora"); err != nil {
			return nil, err
		}
		if local.Started() {
			db.local = local
		}
		log.Info("no APELORA_DATABASE_URL: using a local PostgreSQL from the system's binaries",
			"data", local.DataDir(), "socket", local.SocketDir(), "binaries", local.BinDir, "started_here", local.Started())
		url = local.URL("apelora")
	}
	store, err := postgres.Open(ctx, url, log)
	if err != nil {
		db.Close()
		return nil, err
	}
	if cfg.Metrics != nil {
		store.Observe(cfg.Metrics)
	}
	db.Store = store
	applied, err := store.Migrate(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("apply database migrations: %w", err)
	}
	if len(applied) > 0 {
		log.Info("applied database migrations", "migrations", applied)
	}
	return db, nil
}

// Close closes the connections and stops the local PostgreSQL if this process started it.
func (d *Database) Close() {
	if d.Store != nil {
		d.Store.Close()
	}
	if d.local != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.local.Stop(ctx)
	}
}

// Product is the running product's parts.
type Product struct {
	Handler  http.Handler
	Listener *postgres.Listener
}

// Build wires the domain services and the HTTP handler on store. Background work (the
// database listener that feeds subscriptions) runs until ctx ends.
func Build(ctx context.Context, cfg Config, store *postgres.Store, log *slog.Logger) (*Product, error) {
	var checks []server.MutationCheck
	var ports incusSide = noIncus{}
	var membershipSource membership.Source // nil: the fleet says Incus is not configured
	var fenceCluster fencing.ClusterConfig // nil: the cluster view says Incus is not configured
	var incusClient *incus.Client
	if cfg.Incus.Configured() {
		client, err := incus.New(cfg.incusClient(log))
		if err != nil {
			return nil, err
		}
		incusClient = client
		ports = incusPorts{client}
		membershipSource = ports
		if cfg.Metrics != nil {
			membershipSource = incusAvailability{ports, cfg.Metrics}
		}
		fenceCluster = newFenceIncus(client)
		log.Info("Incus configured", "endpoint", client.Endpoint(), "request_timeout", cfg.upstreamTimeout().String())
	} else {
		log.Warn("Incus is not configured: every change is refused until APELORA_INCUS_URL (or APELORA_INCUS_SOCKET) is set")
		checks = append(checks, func(context.Context) error { return errIncusNotConfigured })
	}

	var maasSide *maasPorts
	var fenceMachines fencing.MachineReader // nil: mappings are saved unchecked, and the payload says so
	if cfg.MAAS.BaseURL != "" {
		mc := cfg.maasClient(log)
		// People wait on these answers: retry reads briefly rather than for MAAS's full
		// Retry-After, and only inside the request timeout (the client's bound per call).
		mc.MaxRetries, mc.MaxRetryWait = 2, 2*time.Second
		client, err := maas.New(mc)
		if err != nil {
			return nil, err
		}
		maasSide = &maasPorts{client}
		fenceMachines = fenceMAAS{client}
		log.Info("MAAS configured", "url", mc.BaseURL, "request_timeout", mc.RequestTimeout.String())
	}

	if cfg.Metrics != nil {
		store.Observe(cfg.Metrics)
	}
	listener := store.NewListener(postgres.AuditChannel, postgres.AdmissionChannel, postgres.FenceChannel, postgres.IdentityChannel,
		postgres.ConsoleSessionChannel, postgres.DriftChannel)
	go listener.Run(ctx)
	sessions := identity.NewSessions(store, log)
	go listener.WatchIdentities(ctx, sessions)
	go listener.WatchConsoleSessions(ctx, sessions)
	feed := store.NewAuditFeed()
	go feed.Run(ctx, listener)
	admissionFeed := store.NewAdmissionFeed()
	go admissionFeed.Run(ctx, listener)
	fenceFeed := store.NewFenceFeed()
	go fenceFeed.Run(ctx, listener)
	driftFeed := store.NewDriftFeed()
	go driftFeed.Run(ctx, listener)
	select {
	case <-listener.Ready():
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(15 * time.Second):
		return nil, errors.New("could not LISTEN for database notifications within 15 s: check the database")
	}

	records := store.Machines()
	enrol := &enrolment.Service{Incus: ports, Store: storeWithRecords{store}, Log: log}
	res := &resolvers.Resolver{
		Machines: &machines.Service{Store: records, Membership: ports},
		View: &fleet.Service{Records: records, Admissions: store, Incus: membershipSource, Fences: store.Fences(),
			Profiles: store.HardwareProfiles(), Drift: store.Drift()},
		Enrolment: enrol,
		Admission: &admission.Service{
			Checker: &admission.Checker{Incus: ports, Publish: cfg.Metrics.Admissions(store.AdmissionPublisher()), Profiles: store.HardwareProfiles()},
			Members: ports,
			Store:   storeWithRecords{store},
		},
		Provisioning: &provisioning.Service{
			Store: storeWithRecords{store}, Membership: ports, Enrolment: enrol, EnrolScript: scripts.EnrolMember,
		},
		Versions:      ports,
		Audit:         store,
		AuditFeed:     feed,
		AdmissionFeed: admissionFeed,
		Fencing: &fencing.Service{
			Store: store.Fences(), Records: records, Feed: fenceFeed, MAAS: fenceMachines,
			Incus: fenceCluster, Membership: membershipSource,
		},
		Identity:  &identity.Service{Store: store},
		Hardware:  &hardware.Service{Store: store.HardwareProfiles()},
		DriftView: &drift.Service{Store: store.Drift(), Feed: driftFeed},
		Log:       log,
	}
	if maasSide != nil {
		// Each is set only when MAAS is configured: a nil interface means "not configured".
		res.Machines.MAAS = maasSide
		res.View.MAAS = maasSide
		if cfg.Metrics != nil {
			res.View.MAAS = maasAvailability{maasSide, cfg.Metrics}
		}
		res.Admission.Checker.MAAS = maasSide
		res.Admission.Checker.MAASInventory = maasSide
		res.Provisioning.MAAS = maasSide
		res.Provisioning.ImageSource = maasSide
	}
	if incusClient != nil && cfg.DriftInterval > 0 {
		startDrift(ctx, cfg, store, incusClient, res.Admission.Checker, log)
	}
	h := server.Handler(server.Config{
		Log:              log,
		Store:            store,
		Resolvers:        res,
		MutationChecks:   checks,
		PingInterval:     cfg.PingInterval,
		AllowedOrigins:   cfg.AllowedOrigins,
		PublicURL:        cfg.PublicURL,
		Sessions:         sessions,
		AuthFailureLimit: cfg.AuthFailureLimit,
		SessionTTL:       cfg.SessionTTL,
		Observer:         cfg.serverObserver(),
		Routes: func(mux *http.ServeMux) {
			mux.HandleFunc("GET /enrol/enrol-member.sh", serveEnrolScript)
		},
	})
	return &Product{Handler: h, Listener: listener}, nil
}

// storeWithRecords is the store as the enrolment and admission steps see it: audited
// changes, machine records and the admission trail.
type storeWithRecords struct{ *postgres.Store }

func (s storeWithRecords) Record(ctx context.Context, name string) (*machines.Record, error) {
	return s.Store.Machines().Record(ctx, name)
}

func (s storeWithRecords) RecordBySystemID(ctx context.Context, systemID string) (*machines.Record, error) {
	return s.Store.Machines().RecordBySystemID(ctx, systemID)
}

// serveEnrolScript serves enrol-member.sh, which new servers fetch. It holds no secret.
func serveEnrolScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/x-shellscript; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="enrol-member.sh"`)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(scripts.EnrolMember)
}
