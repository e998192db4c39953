// Package app wires Apelora together from its configuration: the database (a given one,
// or a local PostgreSQL in the state folder), the domain services, the GraphQL server.
// cmd/apelora and the end-to-end tests build the product the same way through it.
//
// Its parts: config.go (the APELORA_* configuration and the request-timeout policy),
// database.go (opening and migrating the database), wiring.go (Build: the services and
// their ports plugged together), incusports.go and maasports.go (the port adapters: the
// Incus and MAAS clients in the domain's words and errors), worker.go (apelora-worker's
// configuration and wiring), identities.go (`apelora identity` on the server).
package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/admission"
	"github.com/apelora/fabric/apperr"
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

// Product is the running product's parts.
type Product struct {
	Handler  http.Handler
	Listener *postgres.Listener
}

// Build wires the domain services and the HTTP handler on store. Background work (the
// database listener that feeds subscriptions) runs until ctx ends.
func Build(ctx context.Context, cfg Config, store *postgres.Store, log *slog.Logger) (*Product, error) {
	// A port to an upstream that is not configured stays nil (apperr.NotConfigured): the
	// domain checks for nil where it can go without it, and says so where it cannot.
	var checks []server.MutationCheck
	var incusSide *incusPorts
	var fleetIncus membership.Source // the fleet's reads also tell the metrics whether Incus answered
	var fenceCluster fencing.ClusterConfig
	var incusClient *incus.Client
	if cfg.Incus.Configured() {
		client, err := incus.New(cfg.incusClient(log))
		if err != nil {
			return nil, err
		}
		incusClient = client
		incusSide = newIncusPorts(client)
		fleetIncus = incusSide
		if cfg.Metrics != nil {
			fleetIncus = incusAvailability{incusSide, cfg.Metrics}
		}
		fenceCluster = newFenceIncus(client)
		log.Info("Incus configured", "endpoint", client.Endpoint(), "request_timeout", cfg.upstreamTimeout().String())
	} else {
		log.Warn("Incus is not configured: every change is refused until APELORA_INCUS_URL (or APELORA_INCUS_SOCKET) is set")
		checks = append(checks, func(context.Context) error { return apperr.NotConfigured(apperr.Incus) })
	}

	var maasSide *maasPorts
	var fenceMachines fencing.MachineReader
	if cfg.MAAS.BaseURL != "" {
		mc := cfg.maasClient(log)
		// People wait on these answers: retry reads briefly rather than for MAAS's full
		// Retry-After, and only inside the request timeout (the client's bound per call).
		mc.MaxRetries, mc.MaxRetryWait = 2, 2*time.Second
		client, err := maas.New(mc)
		if err != nil {
			return nil, err
		}
		maasSide = newMAASPorts(client)
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
	// Subscriptions are served once the feeds listen and know where their tables end.
	ready := time.After(15 * time.Second)
	for _, started := range []<-chan struct{}{listener.Ready(), feed.Hub().Started(), fenceFeed.Hub().Started(), driftFeed.Hub().Started()} {
		select {
		case <-started:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ready:
			return nil, errors.New("could not LISTEN for database notifications within 15 s: check the database")
		}
	}

	records := store.Machines()
	enrol := &enrolment.Service{Store: storeWithRecords{store}, Log: log}
	res := &resolvers.Resolver{
		Machines: &machines.Service{Store: records},
		View: &fleet.Service{Records: records, Admissions: store, Fences: store.Fences(),
			Profiles: store.HardwareProfiles(), Drift: store.Drift(), One: &fleet.One{BySystemID: records}},
		Enrolment: enrol,
		Admission: &admission.Service{
			Checker: &admission.Checker{Publish: cfg.Metrics.Admissions(store.AdmissionPublisher()), Profiles: store.HardwareProfiles()},
			Store:   storeWithRecords{store},
		},
		Provisioning: &provisioning.Service{
			Store: storeWithRecords{store}, Enrolment: enrol, EnrolScript: scripts.EnrolMember,
		},
		Audit:         store,
		AuditFeed:     feed.Hub(),
		AdmissionFeed: admissionFeed.Hub(),
		Fencing: &fencing.Service{
			Store: store.Fences(), Records: records, Feed: fenceFeed.Hub(), MAAS: fenceMachines, Incus: fenceCluster,
		},
		Identity:  &identity.Service{Store: store},
		Hardware:  &hardware.Service{Store: store.HardwareProfiles()},
		DriftView: &drift.Service{Store: store.Drift(), Feed: driftFeed.Hub()},
		Log:       log,
	}
	var err error
	if res.AuditLog, err = startAuditLog(ctx, cfg, store, log); err != nil {
		return nil, err
	}
	// Each port is set only when its upstream is configured (an interface holding a nil
	// pointer would not be nil).
	if incusSide != nil {
		enrol.Incus = incusSide
		res.Machines.Membership = incusSide
		res.View.Incus = fleetIncus
		res.View.One.Incus = incusSide
		res.Admission.Checker.Incus = incusSide
		res.Admission.Members = incusSide
		res.Provisioning.Membership = incusSide
		res.Versions = incusSide
		res.Fencing.Membership = incusSide
	}
	if maasSide != nil {
		res.Machines.MAAS = maasSide
		res.View.MAAS = maasSide
		res.View.One.MAAS = maasSide
		if cfg.Metrics != nil {
			res.View.MAAS = maasAvailability{maasSide, cfg.Metrics}
		}
		res.Admission.Checker.MAAS = maasSide
		res.Admission.Checker.MAASInventory = maasSide
		res.Provisioning.MAAS = maasSide
		res.Provisioning.ImageSource = maasSide
	}
	triggers := []fleet.Trigger{hubTrigger(feed.Hub(), mayHaveChanged), hubTrigger(driftFeed.Hub(), nil), hubTrigger(fenceFeed.Hub(), nil)}
	if incusClient != nil {
		triggers = append(triggers, incusTrigger(incusClient, log))
	}
	res.FleetWatch = fleet.NewWatcher(ctx, res.View, fleet.WatcherOptions{Interval: cfg.FleetRefreshInterval, Triggers: triggers, Log: log})
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
