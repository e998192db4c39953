// Package app wires Apelora together from its configuration: the database (a given one,
// or a local PostgreSQL in the state folder), the domain services, the GraphQL server.
// cmd/apelora and the end-to-end tests build the product the same way through it.
//
// Its parts: config.go (the APELORA_* configuration and the request-timeout policy),
// database.go (opening and migrating the database), wiring.go (Build: the services and
// their ports wired together; the ports themselves, the Incus and MAAS clients in the
// domain's words and errors, are adapters/incus and adapters/maas's Ports), worker.go (apelora-worker's
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
	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/drift"
	"github.com/apelora/fabric/domain/enrolment"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/domain/rolling"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
	"github.com/apelora/fabric/internal/server"
	"github.com/apelora/fabric/resolvers"
	"github.com/apelora/fabric/scripts"
)

// Product is the running product's parts.
type Product struct {
	Handler  http.Handler
	Listener *postgres.Listener
}

// wirePorts gives each service the ports it declares from the upstream that serves them:
// every assignment written out, so a reader finds who answers a port by searching for it.
// An upstream that is not configured (nil) leaves its ports nil: the services say
// apperr.NotConfigured where they need it. Ports set before (the fleet's reads, through the
// metrics) are kept. The services that act in whichever cluster a machine's record (or the
// call) names (enrolment, admission, the placement guard, evacuations and restores, rolling
// reboots) take the pool's ports per cluster (pool; nil when Incus is not configured) and
// the registered clusters.
func wirePorts(res *resolvers.Resolver, enrol *enrolment.Service, pool *incus.Pool, registry *clusters.Registry, ic *incus.Ports, mc *maas.Ports) {
	if pool != nil {
		enrol.Ports, enrol.Clusters = incus.As[enrolment.Incus](pool), registry
		res.Admission.Checker.Ports, res.Admission.Checker.Clusters = incus.As[admission.Incus](pool), registry
		res.Admission.Members = incus.As[admission.Members](pool)
		res.Placement.Ports, res.Placement.Clusters = incus.As[placement.Incus](pool), registry
		res.Maintenance.Ports, res.Maintenance.Clusters = incus.As[maintenance.Incus](pool), registry
		res.Rolling.Ports, res.Rolling.Clusters = incus.As[rolling.Incus](pool), registry
		// The guard's state comes from the placement service, not a port of its own.
		res.Admission.Checker.Guard = res.Placement
	}
	if ic != nil {
		res.Machines.Membership = ic
		if res.View.Incus == nil {
			res.View.Incus = ic
		}
		res.View.One.Incus = ic
		res.Provisioning.Membership = ic
		res.Fencing.Membership = ic
		res.Versions = ic
	}
	if mc != nil {
		res.Machines.MAAS = mc
		if res.View.MAAS == nil {
			res.View.MAAS = mc
		}
		res.View.One.MAAS = mc
		res.Admission.Checker.MAAS = mc
		res.Admission.Checker.MAASInventory = mc
		res.Provisioning.MAAS = mc
		res.Provisioning.ImageSource = mc
		res.Provisioning.Hardware = mc
	}
}

// Build wires the domain services and the HTTP handler on store. Background work (the
// database listener that feeds subscriptions) runs until ctx ends.
func Build(ctx context.Context, cfg Config, store *postgres.Store, log *slog.Logger) (*Product, error) {
	// A port to an upstream that is not configured stays nil (apperr.NotConfigured): the
	// domain checks for nil where it can go without it, and says so where it cannot.
	var checks []server.MutationCheck
	var incusSide *incus.Ports
	var fleetIncus membership.Source // the fleet's reads also tell the metrics whether Incus answered
	var fenceCluster fencing.ClusterConfig
	var incusClient *incus.Client
	// One seam for every change of the process (plan.Writes): the store's, handed to the
	// Incus and MAAS clients; the ports add their shared reads' forgetting to it.
	writes := store.Writes()
	if cfg.Metrics != nil {
		writes.AfterEach(cfg.Metrics.Write)
	}
	// A change's lease is as long as a leader's: renewed every third of it while the
	// change runs, it outlives the change only when its process stopped.
	store.SetChangeLease(cfg.leaderLease())
	if cfg.Metrics != nil {
		store.Observe(cfg.Metrics)
	}
	// Before anything can record an event (the adoption of the environment's cluster is
	// the first): every event is sealed with the audit key.
	auditLog, err := startAuditLog(ctx, cfg, store, log)
	if err != nil {
		return nil, err
	}
	// The Incus clusters: their records (the environment's adopted now, or the start
	// refused), and one client per cluster in the pool, made at its first use. This
	// release's member services act in the environment's cluster.
	opts := cfg.incusClient(log)
	opts.Writes = writes
	ics, err := startClusters(ctx, cfg, store, opts, log)
	if err != nil {
		return nil, err
	}
	if ics.env != nil {
		client, err := ics.pool.Client(ctx, ics.env.ID)
		if err != nil {
			return nil, err
		}
		incusClient = client
		if incusSide, err = ics.pool.For(ctx, ics.env.ID); err != nil {
			return nil, err
		}
		fleetIncus = incusSide
		if cfg.Metrics != nil {
			fleetIncus = incusAvailability{incusSide, cfg.Metrics}
		}
		if fenceCluster, err = ics.pool.Fence(ctx, ics.env.ID); err != nil {
			return nil, err
		}
		learnMembers(ctx, client, log)
		log.Info("Incus configured", "cluster", ics.env.Name, "endpoint", client.Endpoint(), "members", len(client.Addresses()), "request_timeout", cfg.upstreamTimeout().String())
	}
	if !cfg.Incus.Configured() {
		log.Warn("Incus is not configured: every change is refused until APELORA_INCUS_URL (or APELORA_INCUS_SOCKET), or Apelora's client identity (APELORA_INCUS_CLIENT_CERT and _KEY) to register clusters with, is set")
		checks = append(checks, func(context.Context) error { return apperr.NotConfigured(apperr.Incus) })
	} else if ics.env == nil {
		log.Warn("no Incus cluster comes from APELORA_INCUS_*: register clusters with registerCluster (enrolment and admission act in each record's cluster; fencing, evacuations and rolling reboots only in the cluster of APELORA_INCUS_*)")
	}

	var maasSide *maas.Ports
	var fenceMachines fencing.MachineReader
	if cfg.MAAS.BaseURL != "" {
		mc := cfg.maasClient(log)
		// People wait on these answers: retry reads briefly rather than for MAAS's full
		// Retry-After, and only inside the request timeout (the client's bound per call).
		mc.MaxRetries, mc.MaxRetryWait = 2, 2*time.Second
		mc.Writes = writes
		client, err := maas.New(mc)
		if err != nil {
			return nil, err
		}
		maasSide = maas.NewPorts(client)
		fenceMachines = maas.NewFencePorts(client)
		log.Info("MAAS configured", "url", mc.BaseURL, "request_timeout", mc.RequestTimeout.String())
	}

	checks = append(checks, auditAppendCheck(store, auditLog))
	listener := store.NewListener(postgres.AuditChannel, postgres.AdmissionChannel, postgres.FenceChannel, postgres.IdentityChannel,
		postgres.ConsoleSessionChannel, postgres.DriftChannel, postgres.MemberOperationChannel, postgres.ClusterChannel)
	go listener.Run(ctx)
	go listener.WatchClusters(ctx, ics.registry)
	sockets := identity.NewSocketRegistry(store, log)
	go listener.WatchIdentities(ctx, sockets)
	go listener.WatchConsoleSessions(ctx, sockets)
	feed := store.NewAuditFeed()
	go feed.Run(ctx, listener)
	admissionFeed := store.NewAdmissionFeed()
	go admissionFeed.Run(ctx, listener)
	fenceFeed := store.NewFenceFeed()
	go fenceFeed.Run(ctx, listener)
	driftFeed := store.NewDriftFeed()
	go driftFeed.Run(ctx, listener)
	maintenanceFeed := store.NewMemberOperationFeed()
	go maintenanceFeed.Run(ctx, listener)
	// Subscriptions are served once the feeds listen and know where their tables end.
	ready := time.After(15 * time.Second)
	for _, started := range []<-chan struct{}{listener.Ready(), feed.Hub().Started(), fenceFeed.Hub().Started(), driftFeed.Hub().Started(), maintenanceFeed.Hub().Started()} {
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
			Store: store.Fences(), Records: records, Feed: fenceFeed.Hub(), MAAS: fenceMachines, Incus: fenceCluster, Clusters: ics.registry,
		},
		Identity:    &identity.Service{Store: store},
		Hardware:    &hardware.Service{Store: store.HardwareProfiles()},
		DriftView:   &drift.Service{Store: store.Drift(), Feed: driftFeed.Hub()},
		Placement:   &placement.Service{Store: store},
		Maintenance: &maintenance.Service{Store: store.Maintenance(), Feed: maintenanceFeed.Hub()},
		Rolling:     &rolling.Service{Store: store.Rolling()},
		Clusters:    ics.service,
		ClusterSide: clusterSide{ics},
		Log:         log,
	}
	res.AuditLog = auditLog
	if err := startAuditExport(ctx, cfg, store, auditLog, log); err != nil {
		return nil, err
	}
	// Each upstream's ports go into every port of the services that it serves (wirePorts);
	// the fleet's reads go through the metrics first.
	res.View.Incus = fleetIncus
	if ics.pool != nil {
		// Every registered cluster's members, read at the same time (the environment's
		// through fleetIncus, as before).
		res.View.Clusters = fleetClusters{ic: ics, env: fleetIncus}
	}
	res.View.UUIDs = uuidCopier{res.Machines}
	if maasSide != nil && cfg.Metrics != nil {
		res.View.MAAS = maasAvailability{maasSide, cfg.Metrics}
	}
	var pool *incus.Pool
	if cfg.Incus.Configured() {
		pool = ics.pool
	}
	wirePorts(res, enrol, pool, ics.registry, incusSide, maasSide)
	triggers := []fleet.Trigger{hubTrigger(feed.Hub(), mayHaveChanged), hubTrigger(driftFeed.Hub(), nil), hubTrigger(fenceFeed.Hub(), nil)}
	var events *incusEvents // one lifecycle stream per replica, for the fleet stream and drift
	if incusClient != nil {
		events = newIncusEvents(ctx, incusClient)
		triggers = append(triggers, incusTrigger(events, log))
	}
	res.FleetWatch = fleet.NewWatcher(ctx, res.View, fleet.WatcherOptions{Interval: cfg.FleetRefreshInterval, Triggers: triggers, Log: log})
	if events != nil && cfg.DriftInterval > 0 {
		startDrift(ctx, cfg, store, events, res.Admission.Checker, log)
	}
	if pool != nil {
		// Every replica follows the evacuations and restores recorded in the database (each
		// through its task's cluster), so one started before a restart (here or elsewhere)
		// is reported again.
		res.Maintenance.Checker = res.Admission.Checker
		follower := maintenance.NewFollower(res.Maintenance.Ports, store.Maintenance(), log, maintenanceTaskPoll)
		res.Maintenance.Wake = follower.Wake
		go follower.Run(ctx)
	}
	if incusSide != nil {
		go markCarriedOver(ctx, res.Admission, store, log)
		// Steps sent to Incus or MAAS whose outcome was never recorded (a process that
		// stopped, a database that failed over) are found and recorded.
		startReconciler(ctx, cfg, store, res, log)
	}
	sso, err := cfg.sso(store, log)
	if err != nil {
		return nil, err
	}
	// Every replica asks the provider again about the SSO sessions due (each claimed by one).
	go sso.RunRechecks(ctx)
	h := server.Handler(server.Config{
		Log:               log,
		Store:             store,
		Resolvers:         res,
		MutationChecks:    checks,
		Scopes:            scopes{ics.registry, store},
		PingInterval:      cfg.PingInterval,
		AllowedOrigins:    cfg.AllowedOrigins,
		PublicURL:         cfg.PublicURL,
		Sockets:           sockets,
		AuthFailureLimit:  cfg.AuthFailureLimit,
		TrustedProxies:    cfg.TrustedProxies,
		ConsoleSessionTTL: cfg.ConsoleSessionTTL,
		Observer:          cfg.serverObserver(),
		AccessLogLevel:    cfg.accessLogLevel(),
		StepConcurrency:   cfg.StepConcurrency,
		RequestTimeout:    cfg.RequestTimeout,
		SSO:               sso,
		RefusalWindow:     cfg.RefusalWindow,
		IdentityLimits:    cfg.IdentityLimits,
		Stop:              ctx,
		AuditTrail:        auditLog,
	})
	return &Product{Handler: h, Listener: listener}, nil
}

// learnMembers has the client read the cluster's member list once at start, so it knows
// every member it may reach the cluster through before the one it talks to is lost; an
// Incus that does not answer now is only logged (the next member list teaches it).
func learnMembers(ctx context.Context, c *incus.Client, log *slog.Logger) {
	if err := c.Learn(ctx); err != nil {
		log.Warn("could not read the Incus member list at start: Apelora knows only APELORA_INCUS_URL's addresses until it can", "error", err)
	}
}

// maintenanceTaskPoll is how often the Incus operation of a running maintenance task (an
// evacuation or restore) is read: Incus's progress line changes per instance, so a shorter
// poll reports more of them.
const maintenanceTaskPoll = 200 * time.Millisecond

// storeWithRecords is the store as the enrolment and admission steps see it: audited
// changes, machine records and the admission trail.
type storeWithRecords struct{ *postgres.Store }

func (s storeWithRecords) Record(ctx context.Context, name string) (*machines.Record, error) {
	return s.Store.Machines().Record(ctx, name)
}

func (s storeWithRecords) RecordBySystemID(ctx context.Context, systemID string) (*machines.Record, error) {
	return s.Store.Machines().RecordBySystemID(ctx, systemID)
}

// uuidCopier copies a hardware UUID for the fleet's reads, each copy under a request id of
// its own (the read that noticed it may be no request: the watcher's refresh).
type uuidCopier struct{ m *machines.Service }

func (u uuidCopier) CopyHardwareUUID(ctx context.Context, name, systemID, uuid string) (bool, error) {
	id := logging.NewRequestID()
	return u.m.CopyHardwareUUID(logging.WithRequestID(ctx, id), name, systemID, uuid, id)
}

// accessLogLevel is APELORA_ACCESS_LOG as a level (a Config built in code logs requests at
// INFO).
func (c Config) accessLogLevel() slog.Level {
	if c.AccessLog == "debug" {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// markCarriedOver marks in Incus the members of admissions carried over from the audit
// trail (admission.MarkCarriedOver), trying again every carryOverRetry until it is done:
// until then those members count as admitted without the mark, so nothing waits on it.
func markCarriedOver(ctx context.Context, svc *admission.Service, store *postgres.Store, log *slog.Logger) {
	for {
		id := logging.NewRequestID()
		n, err := svc.MarkCarriedOver(logging.WithRequestID(ctx, id), store, id)
		if n > 0 {
			log.Info("marked the members of admissions carried over from the audit trail", "marked", n, "request_id", id)
		}
		if err == nil {
			return
		}
		log.Warn("could not mark every member admitted before admissions were marked; they count as admitted meanwhile, trying again", "error", apperr.PublicMessage(err), "retry_in", carryOverRetry.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(carryOverRetry):
		}
	}
}

// carryOverRetry is how long markCarriedOver waits before trying again.
const carryOverRetry = time.Minute
