// Package fleet is the joined view the product is built around: each machine record beside
// the Incus member of the same name and, for machines MAAS knows, the MAAS machine, with
// the phase derived from all of them on every read.
package fleet

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/drift"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/internal/apperr"
)

// Machine is one row of the fleet.
type Machine struct {
	Name string
	// Cluster is the Incus cluster the row is about: its record's (for a record naming
	// none, the environment's cluster), else its member's; nil for a MAAS machine with
	// neither, a record no cluster holds, or a fleet read without named clusters. Rows of
	// one cluster share the pointer.
	Cluster *ClusterRef
	Record  *machines.Record          // nil for a member or MAAS machine with no record
	Member  *membership.Member        // nil when not a member (or Incus unknown)
	Pending *membership.PendingJoin   // a pending join token for the name
	MAAS    *provisioning.MAASMachine // nil when MAAS does not report it (or is unknown)
	Fence   *fencing.Status           // nil when the member has no fence mapping
	Profile *hardware.Profile         // the record's hardware profile; nil for none
	Drift   []drift.State             // raised drift, by check (each is a DRIFT warning too)
	// DriftChecked is when the drift watcher last looked at the machine (zero: never,
	// or not an admitted member).
	DriftChecked time.Time
	// DriftQuiet says why the watcher's checks that need the member up are suspended (it
	// is in maintenance), "" while they run.
	DriftQuiet string
	Phase      lifecycle.Phase
	Warnings   []lifecycle.Warning
}

// Source says whether one upstream could be asked for this view.
type Source struct {
	Configured bool
	Available  bool
	Message    string
	// Since is when the source stopped answering: the start of the first read it failed
	// or was too slow to answer after its last answer (zero while it answers).
	Since time.Time
}

// ClusterRef names a cluster a row belongs to.
type ClusterRef struct {
	ID   int64
	Name string
	// Record is the cluster's record as the read found it (nil when the port gave none).
	Record *clusters.Cluster
}

// ClusterSource says whether one cluster answered the read.
type ClusterSource struct {
	Cluster *ClusterRef
	Source  Source
}

// View is the whole fleet with what each source said about itself.
type View struct {
	Machines []Machine
	// Incus is every cluster at once: available when each answered, its message naming
	// those that did not.
	Incus Source
	// Clusters says per cluster whether it answered, ordered by name (empty for a read
	// without named clusters).
	Clusters []ClusterSource
	MAAS     Source
	// late, when MAAS had not answered within the read's patience: waits for its answer
	// (which the read left running) and returns the same view with MAAS's machines in it.
	late func(ctx context.Context) (*View, bool)
}

// DefaultMAASPatience is how long a fleet read waits for MAAS once it has started, when
// Apelora's tables and Incus have answered sooner: a hung MAAS would otherwise hold the
// whole fleet for the request timeout (10 s) although the records and Incus answer at once.
const DefaultMAASPatience = 2 * time.Second

// Records reads machine records.
type Records interface {
	Record(ctx context.Context, name string) (*machines.Record, error)
	Records(ctx context.Context) ([]machines.Record, error)
}

// Admissions reads Apelora's admission records (never the audit trail).
type Admissions interface {
	// OpenAdmissions returns every machine's open admission.
	OpenAdmissions(ctx context.Context) (map[string]lifecycle.Admission, error)
}

// MAASMachines lists the machines MAAS reports, in one call.
type MAASMachines interface {
	Machines(ctx context.Context) ([]provisioning.MAASMachine, error)
}

// Cluster is one Incus cluster whose members the fleet joins.
type Cluster struct {
	ID   int64
	Name string
	// Record is its record (for the answer's Machine.cluster); optional.
	Record *clusters.Cluster
	// Environment: the cluster of APELORA_INCUS_*; a record naming no cluster counts for it.
	Environment bool
	// Incus reads its members and pending join tokens; nil when it cannot be read at all
	// (Unavailable says why: the placeholder not adopted yet).
	Incus       membership.Source
	Unavailable error
}

// Clusters lists the clusters a read joins (the registered ones), without a query.
type Clusters interface {
	Clusters(ctx context.Context) []Cluster
}

// Service assembles the fleet view. Whatever the fleet's size, a view costs one read
// each of the records, the hardware profiles and the admissions, two Incus calls
// (members, pending tokens) and one MAAS call (the machine list), all at the same time
// (concurrent views share the upstream calls: app/, internal/flight). One machine
// (Machine) costs one Incus member read, the pending tokens and one MAAS machine read.
type Service struct {
	Records    Records
	Admissions Admissions
	// Clusters lists the clusters whose members the view joins, each read once per view,
	// all at the same time. Nil: the one cluster Incus reads, unnamed.
	Clusters Clusters
	// Incus is the one cluster's source when Clusters is nil; nil when Incus is not
	// configured.
	Incus membership.Source
	// MAAS is nil when MAAS is not configured.
	MAAS MAASMachines
	// Fences reads every fence mapping with its drill in one query; nil: none shown.
	Fences FenceStatuses
	// Profiles reads every hardware profile in one query; nil: none shown.
	Profiles HardwareProfiles
	// Drift reads every machine's raised drift in one query; nil: none shown.
	Drift DriftStates
	// One reads a single machine for Machine (a mutation's answer); nil: Machine builds
	// the whole view.
	One *One
	// UUIDs records the hardware UUID MAAS now reports for a machine registered before
	// MAAS had one (registered when only discovered); nil: none is copied.
	UUIDs HardwareUUIDs
	// MAASPatience bounds how long View waits for MAAS's machine list from the read's
	// start (it waits for Apelora's tables and Incus in any case); zero:
	// DefaultMAASPatience. A read that stops waiting leaves the call running: the fleet
	// stream fills the MAAS side in when it answers (Watcher).
	MAASPatience time.Duration

	maasDown outage
}

// outage remembers since when an upstream has not answered, for the "since T" every
// view says until it answers again.
type outage struct {
	mu    sync.Mutex
	since time.Time
}

// failed records a read started at start that the upstream did not answer, and returns
// since when it has not answered.
func (o *outage) failed(start time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() || start.Before(o.since) {
		o.since = start
	}
	return o.since
}

// answered records an answer to a read started at start: the outage is over unless it
// began after that read did (an answer to an older call says nothing of a newer one).
func (o *outage) answered(start time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.since.After(start) {
		o.since = time.Time{}
	}
}

// HardwareUUIDs records, in an audited change of its own, a hardware UUID MAAS reports
// for the record name registered from systemID without one (machines.CopyHardwareUUID).
type HardwareUUIDs interface {
	CopyHardwareUUID(ctx context.Context, name, systemID, uuid string) (bool, error)
}

// DriftStates reads what the drift watcher knows of every machine.
type DriftStates interface {
	ByMachine(ctx context.Context) (map[string]drift.Status, error)
}

// HardwareProfiles lists the declared hardware profiles.
type HardwareProfiles interface {
	Profiles(ctx context.Context) ([]hardware.Profile, error)
}

// FenceStatuses reads the fence mappings, their last drills and the members' outages.
type FenceStatuses interface {
	Statuses(ctx context.Context) (map[clusters.MemberKey]fencing.Status, error)
}

type sources struct {
	start    time.Time // when the read began
	records  []machines.Record
	clusters []clusterRead // by name
	// legacy: one unnamed cluster (Service.Incus), which every record belongs to.
	legacy   bool
	admitted map[string]lifecycle.Admission
	maas     []provisioning.MAASMachine
	fences   map[clusters.MemberKey]fencing.Status
	profiles map[string]*hardware.Profile
	drift    map[string]drift.Status
	view     View
}

// read asks every source at the same time: the view costs its slowest read of Apelora's
// tables and Incus, and MAAS's only up to MAASPatience (on a large fleet or a hung MAAS,
// the MAAS list is the slow one).
func (s *Service) read(ctx context.Context) (*sources, error) {
	src := &sources{start: time.Now()}
	s.clusterReads(ctx, src)
	var r reads
	r.db(func() (err error) { src.records, err = s.Records.Records(ctx); return err })
	open := s.readStore(ctx, &r, src)
	var maas chan maasAnswer
	if s.MAAS != nil {
		// Not one of r's reads: the view may be returned before it answers. Its context is
		// not the caller's, so a read that stops waiting leaves the call running for the
		// stream to fill the MAAS side in (it is the MAAS client's call, bounded by its
		// request timeout, and shared by every read that asks meanwhile: internal/flight).
		maas = make(chan maasAnswer, 1)
		mctx := context.WithoutCancel(ctx)
		go func() {
			ms, err := s.MAAS.Machines(mctx)
			maas <- maasAnswer{ms, err}
		}()
	}
	for i := range src.clusters {
		c := &src.clusters[i]
		if c.incus == nil {
			continue
		}
		r.upstream(func() { c.snap, c.err = c.incus.Snapshot(ctx) })
	}
	if err := r.wait(); err != nil {
		return nil, err
	}
	answer, late := s.awaitMAAS(ctx, src.start, maas)
	src.maas = answer.ms
	s.settle(src, *open, answer.err, late)
	if late {
		src.view.late = func(ctx context.Context) (*View, bool) {
			select {
			case a := <-maas:
				return s.complete(ctx, src, a), true
			case <-ctx.Done():
				return nil, false
			}
		}
	}
	s.copyUUIDs(ctx, src)
	return src, nil
}

type maasAnswer struct {
	ms  []provisioning.MAASMachine
	err error
}

// awaitMAAS waits for MAAS's answer until MAASPatience after start (no longer: Apelora's
// tables and Incus have answered by now) or the caller leaves; late: it did not answer.
func (s *Service) awaitMAAS(ctx context.Context, start time.Time, maas chan maasAnswer) (maasAnswer, bool) {
	if maas == nil {
		return maasAnswer{}, false
	}
	patience := s.MAASPatience
	if patience <= 0 {
		patience = DefaultMAASPatience
	}
	t := time.NewTimer(time.Until(start.Add(patience)))
	defer t.Stop()
	select {
	case a := <-maas:
		return a, false
	default:
	}
	select {
	case a := <-maas:
		return a, false
	case <-t.C:
	case <-ctx.Done():
	}
	return maasAnswer{}, true
}

// complete is the view of src, a read that stopped waiting for MAAS, with MAAS's late
// answer a: the same records and Incus, MAAS's machines (or why not) joined in.
func (s *Service) complete(ctx context.Context, src *sources, a maasAnswer) *View {
	done := *src
	// copyUUIDs updates records in place: the earlier view's rows must keep theirs.
	done.records = slices.Clone(src.records)
	done.view = View{Incus: src.view.Incus, Clusters: src.view.Clusters}
	done.maas = a.ms
	s.settleMAAS(&done, a.err, false)
	s.copyUUIDs(ctx, &done)
	done.view.Machines = done.join()
	return &done.view
}

// copyUUIDs records the hardware UUID MAAS reports for every record that lacks one. Every
// read that sees both (the watcher's refresh, the fleet page, the machine page) notices
// the gap, so the copy needs no loop of its own and happens within a refresh of MAAS
// reporting it; it is made once (under the machine's lock, only while the record has
// none), and a copy that fails (the machine is BUSY with a step, the database is gone)
// is left to the next read, the row showing the record as it is meanwhile.
func (s *Service) copyUUIDs(ctx context.Context, src *sources) {
	if s.UUIDs == nil || len(src.maas) == 0 {
		return
	}
	reported := make(map[string]string, len(src.maas))
	for _, m := range src.maas {
		if m.HardwareUUID != "" {
			reported[m.SystemID] = m.HardwareUUID
		}
	}
	for i := range src.records {
		rec := &src.records[i]
		uuid := reported[rec.MAASSystemID]
		if rec.HardwareUUID != "" || rec.MAASSystemID == "" || uuid == "" {
			continue
		}
		if ok, err := s.UUIDs.CopyHardwareUUID(ctx, rec.Name, rec.MAASSystemID, uuid); ok && err == nil {
			rec.HardwareUUID = uuid
		}
	}
}

// reads runs a view's reads at the same time. A failed read of Apelora's own tables
// fails the view; an upstream's failure is said in the view (settle).
type reads struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

func (r *reads) db(read func() error) {
	r.upstream(func() {
		if err := read(); err != nil {
			r.mu.Lock()
			if r.err == nil {
				r.err = err
			}
			r.mu.Unlock()
		}
	})
}

func (r *reads) upstream(read func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		read()
	}()
}

func (r *reads) wait() error {
	r.wg.Wait()
	return r.err
}

// readStore starts the reads of Apelora's tables every row joins (fence mappings, drift,
// hardware profiles, admissions), whole-table reads that are one query each. The
// open admissions are written to the returned map once r is waited for.
func (s *Service) readStore(ctx context.Context, r *reads, src *sources) *map[string]lifecycle.Admission {
	if s.Fences != nil {
		r.db(func() (err error) { src.fences, err = s.Fences.Statuses(ctx); return err })
	}
	if s.Drift != nil {
		r.db(func() (err error) { src.drift, err = s.Drift.ByMachine(ctx); return err })
	}
	if s.Profiles != nil {
		r.db(func() error {
			ps, err := s.Profiles.Profiles(ctx)
			src.profiles = make(map[string]*hardware.Profile, len(ps))
			for i := range ps {
				src.profiles[ps[i].Name] = &ps[i]
			}
			return err
		})
	}
	open := new(map[string]lifecycle.Admission)
	if len(src.clusters) > 0 {
		// Only meaningful when Incus answers, but asked beside it rather than after it.
		r.db(func() (err error) {
			*open, err = s.Admissions.OpenAdmissions(ctx)
			return err
		})
	}
	return open
}

// clusterReads lists the clusters the read joins (one unnamed cluster without
// Service.Clusters), by name, each with what it will be read through.
func (s *Service) clusterReads(ctx context.Context, src *sources) {
	if s.Clusters == nil {
		if s.Incus != nil {
			src.legacy = true
			src.clusters = []clusterRead{{env: true, incus: s.Incus}}
		}
		return
	}
	cs := s.Clusters.Clusters(ctx)
	src.clusters = make([]clusterRead, len(cs))
	for i, c := range cs {
		src.clusters[i] = clusterRead{ref: &ClusterRef{ID: c.ID, Name: c.Name, Record: c.Record}, env: c.Environment, incus: c.Incus, err: c.Unavailable}
		if c.Incus == nil && c.Unavailable == nil {
			src.clusters[i].err = apperr.New(apperr.Unavailable, "Incus cluster %s cannot be read", c.Name)
		}
	}
	sort.Slice(src.clusters, func(i, j int) bool { return src.clusters[i].ref.Name < src.clusters[j].ref.Name })
}

// clusterRead is one cluster's side of a read.
type clusterRead struct {
	ref   *ClusterRef // nil for the one unnamed cluster
	env   bool
	incus membership.Source
	snap  *membership.Snapshot // nil when it did not answer
	err   error
	// problem says why it could not be asked ("" when it answered).
	problem string
}

// answered says whether the cluster's members were read.
func (c *clusterRead) answered() bool { return c != nil && c.snap != nil }

// settle says what each upstream answered; maasLate: MAAS did not answer in time.
func (s *Service) settle(src *sources, open map[string]lifecycle.Admission, maasErr error, maasLate bool) {
	var failed []string
	for i := range src.clusters {
		c := &src.clusters[i]
		st := Source{Configured: true, Available: true, Message: "ok"}
		if c.err != nil || c.snap == nil {
			c.snap = nil
			cause := "Incus could not be asked"
			if c.err != nil {
				cause = problem(c.err, cause)
			}
			c.problem = cause
			if c.ref != nil {
				c.problem = "Incus cluster " + c.ref.Name + ": " + cause
				failed = append(failed, c.problem)
			} else {
				failed = append(failed, cause)
			}
			st = Source{Configured: true, Message: c.problem}
		}
		if c.ref != nil {
			src.view.Clusters = append(src.view.Clusters, ClusterSource{Cluster: c.ref, Source: st})
		}
	}
	switch {
	case len(src.clusters) == 0:
		src.view.Incus = Source{Message: apperr.NotConfigured(apperr.Incus).Message}
	case len(failed) > 0:
		src.view.Incus = Source{Configured: true, Message: strings.Join(failed, "; ")}
		src.admitted = open
	default:
		src.view.Incus = Source{Configured: true, Available: true, Message: "ok"}
		src.admitted = open
	}
	s.settleMAAS(src, maasErr, maasLate)
}

// settleMAAS says what MAAS answered, and since when it has not.
func (s *Service) settleMAAS(src *sources, err error, late bool) {
	switch {
	case s.MAAS == nil:
		src.view.MAAS = Source{Message: apperr.NotConfigured(apperr.MAAS).Message}
	case late:
		since := s.maasDown.failed(src.start)
		src.maas = nil
		src.view.MAAS = Source{Configured: true, Since: since, Message: notAnswering(since, "no answer yet")}
	case err != nil:
		since := s.maasDown.failed(src.start)
		src.maas = nil
		src.view.MAAS = Source{Configured: true, Since: since, Message: notAnswering(since, problem(err, "MAAS could not be asked"))}
	default:
		s.maasDown.answered(src.start)
		src.view.MAAS = Source{Configured: true, Available: true, Message: "ok"}
	}
}

// notAnswering is the one wording of a MAAS that did not answer a read, whatever the
// cause: the rows show what Incus and Apelora's records know meanwhile.
func notAnswering(since time.Time, cause string) string {
	return fmt.Sprintf("MAAS not answering (since %s): machine state from MAAS is missing (%s)", since.UTC().Format(time.RFC3339), cause)
}

func problem(err error, fallback string) string {
	if e, ok := apperr.As(err); ok {
		return e.Message
	}
	return fallback
}

// View returns every machine record, every Incus member and every MAAS machine, joined,
// ordered by name, with what each source said.
func (s *Service) View(ctx context.Context) (*View, error) {
	src, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	src.view.Machines = src.join()
	return &src.view, nil
}

// Machines returns the fleet's rows.
func (s *Service) Machines(ctx context.Context) ([]Machine, error) {
	v, err := s.View(ctx)
	if err != nil {
		return nil, err
	}
	return v.Machines, nil
}

// join builds the rows. A record registered from MAAS meets its MAAS machine by system
// id; any other MAAS machine takes its row by hostname. A member (cluster C, name n) meets
// the record named n when that record is in C (a record naming no cluster: the
// environment's cluster); otherwise it is a row of its own, named n when no record is
// named n and no other cluster has an unclaimed n, else n.C (a "." occurs in no machine
// name, MAAS hostname or "hostname@systemid"), so two clusters' m1 are never confused.
func (src *sources) join() []Machine {
	rows := map[string]*row{}
	get := func(name string) *row {
		if r, ok := rows[name]; ok {
			return r
		}
		r := &row{Machine: Machine{Name: name}}
		rows[name] = r
		return r
	}
	bySystemID := map[string]*row{}
	for i := range src.records {
		rec := &src.records[i]
		r := get(rec.Name)
		r.Record = rec
		r.Profile = src.profiles[rec.HardwareProfile]
		r.cr = src.recordCluster(rec)
		r.Cluster = r.cr.refOf()
		if rec.MAASSystemID != "" {
			bySystemID[rec.MAASSystemID] = r
		}
	}
	for i := range src.maas {
		m := &src.maas[i]
		r, ok := bySystemID[m.SystemID]
		if !ok {
			r = get(m.Hostname)
			if r.MAAS != nil || (r.Record != nil && r.Record.MAASSystemID != "") {
				// The name belongs to another MAAS machine (one registered under it, or a
				// second with the same hostname): keep this one visible on its own row.
				r = get(m.Hostname + "@" + m.SystemID)
			}
		}
		r.MAAS = m
	}
	src.joinMembers(rows, get)
	for _, r := range rows {
		// A mapping is keyed (cluster, member): the row's cluster and its member's name
		// (a row renamed m1.rack2 still has the member m1 of rack2).
		if r.Cluster == nil {
			continue
		}
		name := r.Name
		if r.Member != nil {
			name = r.Member.Name
		}
		if st, ok := src.fences[clusters.MemberKey{Cluster: r.Cluster.ID, Name: name}]; ok {
			r.Fence = &st
		}
	}
	out := make([]Machine, 0, len(rows))
	for _, r := range rows {
		src.derive(r)
		out = append(out, r.Machine)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// row is a row being joined, with the cluster it belongs to (nil: none).
type row struct {
	Machine
	cr *clusterRead
}

func (c *clusterRead) refOf() *ClusterRef {
	if c == nil {
		return nil
	}
	return c.ref
}

// recordCluster is the cluster a record belongs to: the one it names, else the
// environment's; nil when there is none among the read's clusters.
func (src *sources) recordCluster(rec *machines.Record) *clusterRead {
	for i := range src.clusters {
		c := &src.clusters[i]
		if src.legacy || (rec.Cluster == nil && c.env) || (rec.Cluster != nil && c.ref != nil && c.ref.ID == *rec.Cluster) {
			return c
		}
	}
	return nil
}

// joinMembers places every member of every cluster that answered (see join).
func (src *sources) joinMembers(rows map[string]*row, get func(string) *row) {
	// How many clusters have an unclaimed member of each name.
	unclaimed := map[string]int{}
	claims := func(c *clusterRead, name string) bool {
		r, ok := rows[name]
		return ok && r.Record != nil && r.cr == c
	}
	for i := range src.clusters {
		c := &src.clusters[i]
		if c.snap == nil {
			continue
		}
		for j := range c.snap.Members {
			if name := c.snap.Members[j].Name; !claims(c, name) {
				unclaimed[name]++
			}
		}
	}
	for i := range src.clusters {
		c := &src.clusters[i]
		if c.snap == nil {
			continue
		}
		for j := range c.snap.Members {
			mem := &c.snap.Members[j]
			var r *row
			switch existing, ok := rows[mem.Name]; {
			case claims(c, mem.Name):
				r = existing
			case c.ref != nil && (unclaimed[mem.Name] > 1 || ok && existing.Record != nil):
				r = get(mem.Name + "." + c.ref.Name)
			default:
				r = get(mem.Name)
			}
			r.Member, r.cr, r.Cluster = mem, c, c.ref
		}
	}
}

func (src *sources) derive(r *row) {
	f := lifecycle.Facts{HasRecord: r.Record != nil, InMAAS: r.MAAS != nil}
	c := r.cr
	if c == nil && r.Record == nil {
		// A MAAS machine with neither record nor member: no member of any cluster only if
		// every cluster answered.
		c = src.allAnswered()
	}
	switch {
	case c.answered():
		f.IncusKnown = true
		// A row named m1.rack2 is the member m1 of rack2: its tokens are m1's.
		name := r.Name
		if r.Member != nil {
			name = r.Member.Name
		}
		r.Pending = c.snap.PendingFor(name)
		f.IsMember = r.Member != nil
		f.PendingJoinToken = r.Pending != nil
		f.PendingProblem = c.snap.PendingProblem
		if a, ok := src.admitted[r.Name]; ok {
			f.Admission = &a
		}
		if r.Member != nil {
			f.Scheduler = r.Member.Scheduler()
			f.Evacuated = r.Member.Evacuated()
			f.Mark, f.Marked = r.Member.Config[lifecycle.AdmissionKey]
		}
	case c != nil:
		f.IncusProblem = c.problem
	case len(src.clusters) == 0:
		f.IncusProblem = src.view.Incus.Message
	case r.Record != nil:
		f.IncusProblem = "its record names an Incus cluster that is not registered"
	default:
		f.IncusProblem = src.view.Incus.Message
	}
	r.Phase, r.Warnings = lifecycle.Derive(f)
	if r.Record != nil {
		// Drift is kept for records only: the watcher looks at admitted machines.
		st := src.drift[r.Name]
		r.Drift, r.DriftChecked, r.DriftQuiet = st.Drift, st.Checked, st.Quiet
		for _, d := range r.Drift {
			r.Warnings = append(r.Warnings, driftWarning(d))
		}
	}
	if r.Record == nil || r.Record.Provisioner != machines.MAAS {
		return
	}
	switch {
	case !src.view.MAAS.Available:
		r.Warnings = append(r.Warnings, lifecycle.Warning{Code: lifecycle.MAASUnavailable, Message: src.view.MAAS.Message})
	case r.MAAS == nil:
		r.Warnings = append(r.Warnings, lifecycle.Warning{Code: lifecycle.MAASMachineGone, Message: "MAAS no longer reports system id " + r.Record.MAASSystemID + ": the machine was deleted from MAAS"})
	case r.Record.HardwareUUID != "" && r.MAAS.HardwareUUID != r.Record.HardwareUUID:
		r.Warnings = append(r.Warnings, lifecycle.Warning{Code: lifecycle.HardwareMismatch, Message: "MAAS reports hardware UUID " + r.MAAS.HardwareUUID + " for system id " + r.MAAS.SystemID + ", but the record was registered with " + r.Record.HardwareUUID + ": the machine was replaced or the record is wrong"})
	}
}

// allAnswered is, for a row no cluster claims, the environment's cluster (its pending
// tokens) when every cluster answered, else the first that did not (its problem).
func (src *sources) allAnswered() *clusterRead {
	var env *clusterRead
	for i := range src.clusters {
		c := &src.clusters[i]
		if !c.answered() {
			return c
		}
		if env == nil || c.env {
			env = c
		}
	}
	return env
}

// driftWarning is the DRIFT warning of one raised drift.
func driftWarning(d drift.State) lifecycle.Warning {
	return lifecycle.Warning{Code: lifecycle.Drift, Check: d.Check,
		Message: fmt.Sprintf("drift since %s: %s: %s", d.FailingSince.UTC().Format(time.RFC3339), d.Title, d.Evidence)}
}
