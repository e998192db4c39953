package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/adapters/metrics"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/adapters/postgres/pgtest"
	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/enrolment"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/resolvers"
)

// portWrites are the port methods that change something: each must record a call of the
// plan in a dry run. The test finds every port method by reflection; one that records a call
// and is not listed here, or one listed that records none, fails it (so the list follows
// the ports), and one that sends anything but a read fails it whatever the list says.
var portWrites = []string{
	"INCUS UpdateMember", "INCUS IssueJoinToken", "INCUS RevokeJoinToken", "INCUS RemoveMember", "INCUS SetPlacementScriptlet",
	"INCUS ChangeMemberState",
	"MAAS Commission", "MAAS Test", "MAAS Allocate", "MAAS Deploy", "MAAS Release",
	"DATABASE machines.Tx.InsertRecord", "DATABASE machines.Tx.DeleteRecord", "DATABASE machines.Tx.SetHardwareUUID",
	"DATABASE fencing.Tx.PutMapping", "DATABASE fencing.Tx.DeleteMapping",
	"DATABASE hardware.Tx.PutProfile", "DATABASE hardware.Tx.DeleteProfile", "DATABASE hardware.Tx.AssignProfile",
	"DATABASE identity.Tx.InsertIdentity", "DATABASE identity.Tx.SetRevoked", "DATABASE identity.Tx.SetClusterGrants", "DATABASE identity.Tx.SignInSSO", "DATABASE identity.Tx.EndConsoleSessions",
	"DATABASE admission.Publisher.Publish",
	"DATABASE admission.Store.RecordAdmission", "DATABASE enrolment.Store.EndAdmission", "DATABASE enrolment.Store.SetRecordCluster",
	"DATABASE maintenance.Store.StartTask", "DATABASE maintenance.Store.RecordFinished",
	"DATABASE clusters.Tx.Insert", "DATABASE clusters.Tx.Update", "DATABASE clusters.Tx.Delete",
}

// readsOnly fails the test on any request but a GET: in a dry run nothing may reach an
// upstream that could change it.
type readsOnly struct {
	t      *testing.T
	system string
	next   http.RoundTripper
	// method is the port method being called (for the failure message).
	mu     sync.Mutex
	method string
}

func (r *readsOnly) calling(m string) {
	r.mu.Lock()
	r.method = m
	r.mu.Unlock()
}

func (r *readsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		r.mu.Lock()
		m := r.method
		r.mu.Unlock()
		r.t.Errorf("%s: a dry run sent %s %s to %s", m, req.Method, req.URL.Path, r.system)
		return nil, fmt.Errorf("%s %s refused: a dry run changes nothing", req.Method, req.URL.Path)
	}
	return r.next.RoundTrip(req)
}

// fakeIncus answers Incus's reads for one member, m1, with a pending join token for it.
type fakeIncus struct{}

func (fakeIncus) RoundTrip(req *http.Request) (*http.Response, error) {
	member := `{"server_name":"m1","url":"https://127.0.0.1:8443","status":"Online","roles":["database"],"config":{},"groups":["default"],"failure_domain":"default","architecture":"x86_64"}`
	meta := `{}`
	switch p := req.URL.Path; {
	case p == "/1.0/cluster/members" && req.URL.Query().Get("recursion") != "":
		meta = "[" + member + "]"
	case p == "/1.0/cluster/members":
		meta = `["/1.0/cluster/members/m1"]`
	case strings.HasPrefix(p, "/1.0/cluster/members/"):
		meta = member
	case p == "/1.0/operations":
		meta = `{"running":[{"id":"op-1","class":"token","status_code":103,"metadata":{"serverName":"m1","expiresAt":"` +
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}}]}`
	case p == "/1.0/storage-pools" || p == "/1.0/networks":
		meta = `[]`
	case p == "/1.0":
		meta = `{"auth":"trusted","config":{},"environment":{"server_version":"6.0.4","server_clustered":true}}`
	}
	body := `{"type":"sync","status":"Success","status_code":200,"metadata":` + meta + `}`
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"e1"`}},
		Body: io.NopCloser(bytes.NewBufferString(body)), Request: req}, nil
}

// A dry run changes nothing, whichever port write the domain calls: every method of every
// port the domain declares (Incus, MAAS, the PostgreSQL store's changes), found by
// reflection, is called under a plan with upstreams that fail the test on anything but a
// read; each write records its step through the seam (plan.Writes), whose hooks run, and
// the database is as it was, its sequences included.
func TestEveryPortWriteIsAStepInADryRun(t *testing.T) {
	db := pgtest.New(t)
	env := db.EnvironmentCluster(t) // the member rows below are the environment's cluster's (migration 0040)
	store := db.Store
	writes := store.Writes()

	incusGuard := &readsOnly{t: t, system: "Incus", next: fakeIncus{}}
	ic, err := incus.New(incus.Config{SocketPath: filepath.Join(t.TempDir(), "no-incus.socket"), Writes: writes,
		WrapTransport: func(http.RoundTripper) http.RoundTripper { return incusGuard }})
	if err != nil {
		t.Fatal(err)
	}
	key := sim.NewAPIKey()
	s, err := sim.New(sim.Options{
		Users:   []sim.User{{Username: "apelora", APIKey: key, Admin: true}},
		Fixture: sim.Fixture{Machines: sim.GenerateMachines(1, 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	maasGuard := &readsOnly{t: t, system: "MAAS"}
	mc, err := maas.New(maas.Config{BaseURL: ep.BaseURL, APIKey: key, RequestTimeout: 30 * time.Second, Writes: writes,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { maasGuard.next = rt; return maasGuard }})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mc.Machines(t.Context(), maas.MachineFilter{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("MAAS machines %v, %v", ms, err)
	}
	systemID, statusBefore := ms[0].SystemID, ms[0].StatusName

	// What the database writes act on, all named m1 (the argument every string of a port
	// method gets): a machine, a hardware profile, a fence mapping, an identity and an
	// open admission.
	seed := audit.WithAction(t.Context(), &audit.Action{Actor: "test", Name: "seed", Machine: "m1"})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(store.Machines().Change(seed, "m1", func(tx machines.Tx) error {
		return tx.InsertRecord(seed, machines.Record{Name: "m1", Provisioner: machines.Manual, RegisteredAt: time.Now(), RegisteredBy: "test"})
	}))
	must(store.HardwareProfiles().Change(seed, "", func(tx hardware.Tx) error {
		_, err := tx.PutProfile(seed, hardware.Profile{Name: "m1", Architecture: "x86_64", SetBy: "test", SetAt: time.Now()})
		return err
	}))
	must(store.Fences().Change(seed, "m1", func(tx fencing.Tx) error {
		_, err := tx.PutMapping(seed, fencing.Mapping{Member: "m1", SystemID: systemID, HardwareUUID: "4c4c4544-0000-0000-0000-000000000001", SetBy: "test", SetAt: time.Now()})
		return err
	}))
	must(store.ChangeIdentities(seed, func(tx identity.Tx) error {
		_, err := tx.InsertIdentity(seed, "m1", bytes.Repeat([]byte{1}, 32), []identity.Permission{identity.ViewInfrastructure}, nil)
		return err
	}))
	must(store.Audited(seed, "m1", func(ctx context.Context) error {
		_, err := store.RecordAdmission(ctx, admission.Admitted{Cluster: env, Machine: "m1", Member: "m1", By: "test", RequestID: "seed"})
		return err
	}))
	var seededID int64
	must(store.Pool().QueryRow(t.Context(), `SELECT id FROM identities WHERE name = 'm1'`).Scan(&seededID))
	before := databaseState(t, store)
	m := metrics.New(metrics.Server)
	writes.AfterEach(m.Write)
	var hooked sync.Map // system → planned writes the hooks saw
	writes.AfterEach(func(s plan.System, planned bool) {
		if !planned {
			t.Errorf("a %s write was made in a dry run", s)
		}
		n, _ := hooked.LoadOrStore(s, new(int))
		*n.(*int)++
	})

	rec := &plan.Recorder{}
	ctx := plan.With(audit.WithAction(t.Context(), &audit.Action{Actor: "test", Name: "dryRun", Machine: "m1"}), rec)
	recorded := func() int { return rec.Writes() } // each write, also one whose call the plan lists already
	hooks := func() (n int) {
		hooked.Range(func(_, v any) bool { n += *v.(*int); return true })
		return n
	}
	called := map[string]bool{}
	wrote := map[string]bool{}
	call := func(system, name string, guard *readsOnly, fn reflect.Value, args func(reflect.Type) []reflect.Value) {
		key := system + " " + name
		if called[key] {
			return
		}
		called[key] = true
		if guard != nil {
			guard.calling(key)
		}
		s0, h0 := recorded(), hooks()
		out := fn.Call(args(fn.Type()))
		if err, _ := out[len(out)-1].Interface().(error); err != nil {
			t.Logf("%s: %v", key, err)
		}
		if recorded() > s0 {
			wrote[key] = true
			if hooks()-h0 < recorded()-s0 {
				t.Errorf("%s: %d calls recorded but the seam's hooks saw %d writes", key, recorded()-s0, hooks()-h0)
			}
		}
	}
	argsFor := func(name string) func(reflect.Type) []reflect.Value {
		return func(ft reflect.Type) []reflect.Value {
			in := make([]reflect.Value, ft.NumIn())
			for i := range in {
				in[i] = sample(ft.In(i), ctx, name, seededID)
			}
			return in
		}
	}

	// Every method of every port interface the Incus and MAAS ports implement.
	ports := []struct {
		system string
		guard  *readsOnly
		impl   any
		ifaces []reflect.Type
		arg    string
	}{
		{"INCUS", incusGuard, incus.NewPorts(ic), []reflect.Type{
			reflect.TypeFor[membership.Source](), reflect.TypeFor[fleet.IncusMember](), reflect.TypeFor[admission.Incus](),
			reflect.TypeFor[admission.Members](), reflect.TypeFor[enrolment.Incus](), reflect.TypeFor[resolvers.MemberVersions](),
			reflect.TypeFor[placement.Incus](), reflect.TypeFor[maintenance.Incus](),
		}, "m1"},
		{"MAAS", maasGuard, maas.NewPorts(mc), []reflect.Type{
			reflect.TypeFor[provisioning.MAAS](), reflect.TypeFor[provisioning.ImageSource](), reflect.TypeFor[machines.MAASLookup](),
			reflect.TypeFor[provisioning.HardwareDetails](),
			reflect.TypeFor[admission.HardwareTests](), reflect.TypeFor[fleet.MAASMachine](),
		}, systemID},
	}
	for _, p := range ports {
		v := reflect.ValueOf(p.impl)
		for _, it := range p.ifaces {
			for m := range it.Methods() {
				call(p.system, m.Name, p.guard, v.MethodByName(m.Name), argsFor(p.arg))
			}
		}
	}

	// Every method of every transaction a domain change runs with, and the one NOTIFY the
	// domain sends (admission events).
	txs := []struct {
		iface  reflect.Type
		change func(fn func(tx any) error) error
	}{
		{reflect.TypeFor[machines.Tx](), func(fn func(any) error) error {
			return store.Machines().Change(ctx, "m1", func(tx machines.Tx) error { return fn(tx) })
		}},
		{reflect.TypeFor[fencing.Tx](), func(fn func(any) error) error {
			return store.Fences().Change(ctx, "m1", func(tx fencing.Tx) error { return fn(tx) })
		}},
		{reflect.TypeFor[hardware.Tx](), func(fn func(any) error) error {
			return store.HardwareProfiles().Change(ctx, "m1", func(tx hardware.Tx) error { return fn(tx) })
		}},
		{reflect.TypeFor[identity.Tx](), func(fn func(any) error) error {
			return store.ChangeIdentities(ctx, func(tx identity.Tx) error { return fn(tx) })
		}},
		{reflect.TypeFor[clusters.Tx](), func(fn func(any) error) error {
			return store.Clusters().Change(ctx, func(tx clusters.Tx) error { return fn(tx) })
		}},
	}
	for _, x := range txs {
		for m := range x.iface.Methods() {
			// One change per method: each sees the seeded state, as its real call would.
			err := x.change(func(tx any) error {
				name := "m1"
				if strings.HasPrefix(m.Name, "Insert") {
					name = "m2" // a new row: m1's name is taken
				}
				call("DATABASE", x.iface.String()+"."+m.Name, nil, reflect.ValueOf(tx).MethodByName(m.Name), argsFor(name))
				return nil
			})
			if err != nil {
				t.Errorf("%s.%s: the planned change: %v", x.iface, m.Name, err)
			}
		}
	}
	// Every method of the stores that write in the change in progress (the admissions),
	// each called inside an audited change of m1.
	for _, view := range []struct {
		it   reflect.Type
		recv any
	}{
		{reflect.TypeFor[admission.Store](), store}, {reflect.TypeFor[admission.CarriedOverStore](), store}, {reflect.TypeFor[enrolment.Store](), store},
		{reflect.TypeFor[maintenance.Store](), store.Maintenance()},
	} {
		it := view.it
		for m := range it.Methods() {
			if m.Type.NumIn() > 0 && m.Type.In(m.Type.NumIn()-1).Kind() == reflect.Func {
				continue // Audited itself: the change every other method runs in
			}
			if !reflect.ValueOf(view.recv).MethodByName(m.Name).IsValid() {
				continue // served by another view of the store (the machine records)
			}
			err := store.Audited(ctx, "m1", func(fctx context.Context) error {
				call("DATABASE", it.String()+"."+m.Name, nil, reflect.ValueOf(view.recv).MethodByName(m.Name), func(ft reflect.Type) []reflect.Value {
					in := make([]reflect.Value, ft.NumIn())
					for i := range in {
						in[i] = sample(ft.In(i), fctx, "m1", seededID)
					}
					return in
				})
				return nil
			})
			if err != nil {
				t.Errorf("%s.%s: the planned change: %v", it, m.Name, err)
			}
		}
	}
	pub := store.AdmissionPublisher()
	call("DATABASE", "admission.Publisher.Publish", nil, reflect.ValueOf(pub).MethodByName("Publish"), argsFor("m1"))

	var got []string
	for k := range wrote {
		got = append(got, k)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(portWrites))
	if !slices.Equal(got, want) {
		t.Errorf("port methods that recorded a call:\n%q\nwant (portWrites):\n%q", got, want)
	}
	for _, w := range portWrites {
		if !called[w] {
			t.Errorf("%s is in portWrites but no port interface has it", w)
		}
	}
	if after := databaseState(t, store); after != before {
		t.Errorf("a dry run changed the database:\nbefore %s\nafter  %s", before, after)
	}
	ms, err = mc.Machines(t.Context(), maas.MachineFilter{})
	if err != nil || ms[0].StatusName != statusBefore {
		t.Errorf("MAAS machine after the dry run: %v, %v (was %s)", ms, err, statusBefore)
	}
	// The metrics counted each write, as planned.
	counted := map[string]float64{}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "apelora_writes_total" {
			continue
		}
		for _, c := range f.GetMetric() {
			var system, mode string
			for _, l := range c.GetLabel() {
				switch l.GetName() {
				case "system":
					system = l.GetValue()
				case "mode":
					mode = l.GetValue()
				}
			}
			counted[system+" "+mode] += c.GetCounter().GetValue()
		}
	}
	var total float64
	for k, v := range counted {
		if !strings.HasSuffix(k, " planned") {
			t.Errorf("apelora_writes_total{%s} = %v in a dry run", k, v)
		}
		total += v
	}
	if int(total) != hooks() {
		t.Errorf("apelora_writes_total counted %v planned writes, the seam made %d", total, hooks())
	}
	t.Logf("%d port methods called, %d writing, %d calls recorded, %v counted", len(called), len(wrote), recorded(), counted)
}

// sample is an argument of type at for a port method called in a dry run: the plan's
// context, name for strings (a member name, a MAAS system id), id for identity ids, and
// zero values with Name set to name for structs.
func sample(at reflect.Type, ctx context.Context, name string, id int64) reflect.Value {
	if at == reflect.TypeFor[context.Context]() {
		return reflect.ValueOf(ctx)
	}
	v := reflect.New(at).Elem()
	switch at.Kind() {
	case reflect.String:
		v.SetString(name)
	case reflect.Int64:
		v.SetInt(id)
	case reflect.Int, reflect.Int32:
		v.SetInt(1)
	case reflect.Slice:
		if at.Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("#cloud-config\n"))
		}
	case reflect.Struct:
		if at == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Now()))
			break
		}
		for _, f := range []string{"Name", "Member", "Machine"} {
			if fv := v.FieldByName(f); fv.IsValid() && fv.Kind() == reflect.String && fv.CanSet() {
				fv.SetString(name)
			}
		}
		// A member as Incus needs one back: in a group and a failure domain.
		if fv := v.FieldByName("Groups"); fv.IsValid() && fv.CanSet() {
			fv.Set(reflect.ValueOf([]string{"default"}))
		}
		if fv := v.FieldByName("FailureDomain"); fv.IsValid() && fv.CanSet() {
			fv.SetString("default")
		}
	}
	return v
}

// databaseState is every table's row count and content digest, and every sequence's
// last value.
func databaseState(t *testing.T, store *postgres.Store) string {
	t.Helper()
	ctx := t.Context()
	rows, err := store.Pool().Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var b strings.Builder
	for _, tb := range tables {
		var n, sum int64
		if err := store.Pool().QueryRow(ctx, `SELECT count(*), coalesce(sum(hashtext(t::text)), 0) FROM `+tb+` t`).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%d/%x ", tb, n, sum)
	}
	rows, err = store.Pool().Query(ctx, `SELECT sequencename, coalesce(last_value, 0) FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		var v int64
		if err := rows.Scan(&n, &v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s@%d ", n, v)
	}
	return b.String()
}
