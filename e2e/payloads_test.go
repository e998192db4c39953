package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// walker asks a running product for every field of every answer and keeps what lied.
type walker struct {
	t     *testing.T
	e     *producttest.Env
	token string
	s     *ast.Schema
	sel   *selector
	// real and planned: the mutations driven to success, and planned (dryRun) unrefused.
	real, planned map[string]bool
	queried       map[string]bool
}

// payloadMayBeNull are the payload fields a change that succeeded may leave null, each
// for the reason its description gives; every other field but plan must be there.
var payloadMayBeNull = map[string]string{
	"SetFenceMappingPayload.previous":              "the mapping this one replaced, if any",
	"SetHardwareProfilePayload.previous":           "the profile this one replaced, if any",
	"AssignHardwareProfilePayload.previousProfile": "null for none",
	"ClearHardwareProfilePayload.previousProfile":  "null when it had none",
	"RemoveMemberPayload.machine":                  "null for a member that had no record",
	"ReleaseMachinePayload.machine":                "null for a MAAS machine with no record",
	"MaasMachinePayload.machine":                   "the Apelora machine registered from it, if any",
	"RestoreMemberPayload.report":                  "set when the checks ran",
}

// readBackSkipped are payload fields not compared with a read right after the answer:
// they describe the past (what was replaced or removed), or Incus carries the change on
// after the answer (an evacuation or a restore is an Incus operation that runs on).
var readBackSkipped = map[string]bool{
	"SetFenceMappingPayload.previous": true, "SetHardwareProfilePayload.previous": true,
	"RemoveFenceMappingPayload.removed": true, "RemoveHardwareProfilePayload.removed": true,
	"EvacuateMemberPayload.machine": true, "RestoreMemberPayload.machine": true,
}

// reader reads an object of a type again, by its key, with the same selection.
type reader struct {
	query func(sel string) string
	// vars and pick find the object: its variables, and where it is in the data.
	vars func(obj map[string]any) map[string]any
	pick func(data, obj map[string]any) any
	// moving are fields that change on their own between the answer and the read.
	moving []string
}

func byKey(list any, key string, value any) any {
	l, _ := list.([]any)
	for _, x := range l {
		if m, ok := x.(map[string]any); ok && m[key] == value {
			return m
		}
	}
	return nil
}

// readers re-read every kind of object a payload holds that a query can read alone.
var readers = map[string]reader{
	"Machine": {
		query: func(sel string) string { return `query($k: String!) { machine(name: $k) ` + sel + ` }` },
		vars:  func(o map[string]any) map[string]any { return map[string]any{"k": o["name"]} },
		pick:  func(d, _ map[string]any) any { return d["machine"] },
		// The drift watcher stamps a member each round.
		moving: []string{"driftCheckedAt", "lastChecked"},
	},
	"RollingReboot": {
		query:  func(sel string) string { return `query($k: ID) { rollingReboot(id: $k) ` + sel + ` }` },
		vars:   func(o map[string]any) map[string]any { return map[string]any{"k": o["id"]} },
		pick:   func(d, _ map[string]any) any { return d["rollingReboot"] },
		moving: []string{"stageSeconds", "stepSeconds"}, // time in the stage, counted at each read
	},
	"Identity": {
		query:  func(sel string) string { return `{ identities ` + sel + ` }` },
		vars:   func(map[string]any) map[string]any { return nil },
		pick:   func(d, o map[string]any) any { return byKey(d["identities"], "name", o["name"]) },
		moving: []string{"lastUsedAt"},
	},
	"HardwareProfile": {
		query: func(sel string) string { return `query($k: String!) { hardwareProfile(name: $k) ` + sel + ` }` },
		vars:  func(o map[string]any) map[string]any { return map[string]any{"k": o["name"]} },
		pick:  func(d, _ map[string]any) any { return d["hardwareProfile"] },
	},
	"FenceMapping": {
		query: func(sel string) string { return `{ fenceMappings ` + sel + ` }` },
		vars:  func(map[string]any) map[string]any { return nil },
		pick:  func(d, o map[string]any) any { return byKey(d["fenceMappings"], "member", o["member"]) },
	},
	"MaintenanceTask": {
		query: func(sel string) string { return `query($k: String!) { maintenanceTasks(name: $k) ` + sel + ` }` },
		vars:  func(o map[string]any) map[string]any { return map[string]any{"k": o["machine"]} },
		pick:  func(d, o map[string]any) any { return byKey(d["maintenanceTasks"], "id", o["id"]) },
		// Incus's operation goes on after the answer: its end is recorded when seen.
		moving: []string{"finishedAt", "outcome", "message"},
	},
	// The deprecated name of a maintenance task (EvacuateMemberPayload.operation …), read
	// back by its deprecated query.
	"MemberOperation": {
		query:  func(sel string) string { return `query($k: String!) { memberOperations(name: $k) ` + sel + ` }` },
		vars:   func(o map[string]any) map[string]any { return map[string]any{"k": o["machine"]} },
		pick:   func(d, o map[string]any) any { return byKey(d["memberOperations"], "id", o["id"]) },
		moving: []string{"finishedAt", "outcome", "message"},
	},
	"PlacementGuard": {
		query: func(sel string) string { return `{ cluster { placementGuard ` + sel + ` } }` },
		vars:  func(map[string]any) map[string]any { return nil },
		pick:  func(d, _ map[string]any) any { return d["cluster"].(map[string]any)["placementGuard"] },
	},
	"MaasMachine": {
		// The machine of that hostname: MAAS's facts read by hostname, as the machine page does.
		query: func(sel string) string { return `query($k: String!) { machine(name: $k) { maas ` + sel + ` } }` },
		vars:  func(o map[string]any) map[string]any { return map[string]any{"k": o["hostname"]} },
		pick: func(d, o map[string]any) any {
			if m, ok := d["machine"].(map[string]any); ok {
				if mm, ok := m["maas"].(map[string]any); ok && mm["systemId"] == o["systemId"] {
					return mm
				}
			}
			return nil
		},
	},
}

// lie records a field that erred, or answered null or something else than a read right
// after it, for a call that succeeded; the walk goes on.
func (w *walker) lie(call, format string, args ...any) {
	w.t.Helper()
	w.t.Errorf("LIE in %s: %s", call, fmt.Sprintf(format, args...))
}

// answerErrors reports the errors of an answer; it returns whether the root field itself
// was refused (its error's path is the root field alone), as opposed to a field inside
// the answer that erred.
func (w *walker) answerErrors(call string, r *producttest.Response) (refused bool) {
	w.t.Helper()
	for _, e := range r.Errors {
		if len(e.Path) <= 1 {
			refused = true
			continue
		}
		w.lie(call, "field %v erred: %s: %s", e.Path, e.Extensions["code"], e.Message)
	}
	return refused
}

// change drives mutation name with input: first its plan (dryRun: true), which must not
// be refused, then the change itself, which must succeed. Both ask for every field of the
// payload; the change's answer must hold every field it promises (payloadMayBeNull aside)
// and say what a read right after says. It returns the change's payload.
func (w *walker) change(name string, input map[string]any) map[string]any {
	w.t.Helper()
	f := w.s.Mutation.Fields.ForName(name)
	if f == nil {
		w.t.Fatalf("the scenario drives %s, which the schema does not have", name)
	}
	payloadType := f.Type.Name()

	dry := map[string]any{}
	for k, v := range input {
		dry[k] = v
	}
	dry["dryRun"] = true
	q, vars, err := w.sel.call("Mutation", f, map[string]any{"input": dry})
	if err != nil {
		w.t.Fatal(err)
	}
	r := w.e.GQL(w.token, q, vars)
	call := name + " (plan)"
	if w.answerErrors(call, r) {
		w.t.Fatalf("%s refused: %+v", call, r.Errors)
	}
	if p, _ := r.Data[name].(map[string]any); p == nil || p["plan"] == nil {
		w.lie(call, "no plan in %s", compact(r.Data[name]))
	} else if plan := p["plan"].(map[string]any); plan["refused"] != false {
		w.t.Fatalf("%s: the plan of a change the lab allows is refused: %s", call, compact(plan["refusals"]))
	} else {
		w.planned[name] = true
	}

	q, vars, err = w.sel.call("Mutation", f, map[string]any{"input": input})
	if err != nil {
		w.t.Fatal(err)
	}
	r = w.e.GQL(w.token, q, vars)
	if w.answerErrors(name, r) {
		w.t.Fatalf("%s refused: %+v", name, r.Errors)
	}
	payload, _ := r.Data[name].(map[string]any)
	if payload == nil {
		w.lie(name, "the payload is null: %+v", r.Errors)
		return map[string]any{}
	}
	w.real[name] = true
	for _, pf := range w.s.Types[payloadType].Fields {
		key := payloadType + "." + pf.Name
		v := payload[pf.Name]
		switch {
		case pf.Name == "plan":
			if v != nil {
				w.lie(name, "a change that was made answers a plan")
			}
		case v == nil:
			if _, ok := payloadMayBeNull[key]; !ok {
				w.lie(name, "%s is null, yet the change was made", key)
			}
		case !readBackSkipped[key]:
			w.readBack(name, key, pf, v)
		}
	}
	return payload
}

// readBack reads the objects of payload field pf again and compares them with the answer.
func (w *walker) readBack(call, key string, pf *ast.FieldDefinition, v any) {
	w.t.Helper()
	rd, ok := readers[pf.Type.Name()]
	if !ok {
		return
	}
	sel, err := w.sel.of(pf.Type.Name(), 1)
	if err != nil {
		w.t.Fatal(err)
	}
	objs := []any{v}
	if l, ok := v.([]any); ok {
		objs = l
	}
	moving := map[string]bool{}
	for _, m := range rd.moving {
		moving[m] = true
	}
	for _, o := range objs {
		obj := o.(map[string]any)
		r := w.e.GQL(w.token, rd.query(sel), rd.vars(obj))
		if len(r.Errors) > 0 {
			w.lie(call, "reading %s back: %+v", key, r.Errors)
			continue
		}
		got := rd.pick(r.Data, obj)
		if got == nil {
			w.lie(call, "%s answered %s, which a read right after does not find", key, compact(obj))
			continue
		}
		for _, d := range differences(key, strip(obj, moving), strip(got, moving)) {
			w.lie(call, "%s", d)
		}
	}
}

// queries asks every Query field for every field of its type, with args for those that
// need them; want names the nullable ones that must answer an object at this point.
func (w *walker) queries(when string, args map[string]map[string]any, want []string) {
	w.t.Helper()
	for _, f := range schemaRootFields(w.s.Query) {
		q, vars, err := w.sel.call("Query", f, args[f.Name])
		if err != nil {
			w.t.Fatal(err)
		}
		call := f.Name + " (" + when + ")"
		r := w.e.GQL(w.token, q, vars)
		for _, e := range r.Errors {
			w.lie(call, "%v: %s: %s", e.Path, e.Extensions["code"], e.Message)
		}
		if len(r.Errors) == 0 {
			w.queried[f.Name] = true
		}
		if slices.Contains(want, f.Name) && r.Data[f.Name] == nil && len(r.Errors) == 0 {
			w.lie(call, "answered null where the scenario holds one")
		}
	}
}

// TestEveryFieldOfEveryAnswer drives every mutation of the schema to success on a real
// Incus lab and the MAAS simulator over TLS (and plans each first), asking each time for
// every field of its payload, generated from schema/*.graphqls; and asks every query for
// every field of its type, twice: with every kind of object in the lab, and after the
// lab is emptied again. A field that errs, a payload field null after the change was made,
// or a payload object that differs from a read right after it is a lie, and fails the test.
//
// The path: the placement guard on; an automation identity; m1 (the bootstrap member)
// registered and admitted; a manual machine approved, its token revoked, unregistered; a
// MAAS machine registered, commissioned, tested, given a hardware profile, installed (its
// user data joins it to the lab, held), admitted, fence-mapped, a rolling reboot started,
// paused, resumed and cancelled, an instance evacuated and restored; then all of it undone.
func TestEveryFieldOfEveryAnswer(t *testing.T) {
	parallel(t)
	s := loadSchema(t)
	lab := incuslab.Start(t, 1)
	ctx := t.Context()
	m1 := lab.Members[0]
	cli := func(args ...string) {
		t.Helper()
		if out, err := lab.CLI(m1, args...); err != nil {
			t.Fatalf("incus %v: %v\n%s", args, err, out)
		}
	}
	// Evacuation on the lab's dir pool needs a root disk in the default profile.
	cli("profile", "device", "add", "default", "root", "disk", "path=/", "pool="+incuslab.Pool)

	res, err := lab.Client(t, m1).Resources(ctx, m1.Name)
	if err != nil {
		t.Fatal(err)
	}
	arch, ok := hardware.NormalizeArchitecture(res.Architecture)
	if !ok {
		t.Fatalf("this host's architecture %q is not one profiles know", res.Architecture)
	}
	maasArch := map[string]string{"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64el", "i686": "i386", "armv7l": "armhf"}[arch]
	if maasArch == "" {
		maasArch = arch
	}
	const uuid = "4c4c4544-0042-3510-8052-c7c04f4e0b0b"
	m := producttest.StartMAAS(t, sim.Fixture{
		Config: map[string]any{"enable_disk_erasing_on_release": false, "default_distro_series": "noble"},
		Machines: []sim.MachineSpec{
			{SystemID: "wlk001", Hostname: "node-a", Status: sim.StatusReady, PowerType: "ipmi", HardwareUUID: uuid,
				Architecture: maasArch + "/generic", CPUCount: 16, Memory: 65536,
				Disks:      []sim.DiskSpec{{Name: "sda", SizeBytes: 480_103_981_056}},
				Interfaces: []sim.InterfaceSpec{{Name: "eno1", LinkSpeed: 10000}}},
			// Discovered and never registered: a fleet row with MAAS's facts alone.
			{SystemID: "wlk002", Hostname: "node-new", Status: 0, PowerType: "ipmi", HardwareUUID: "4c4c4544-0042-3510-8052-c7c04f4e0c0c"},
		},
	})
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config),
		producttest.WithDrift(2*time.Second, time.Minute),
		func(c *app.Config) { c.StateDir, c.AuditCheckpointInterval = t.TempDir(), time.Second })
	admin := e.Identity("admin", identity.ManageInfrastructure)
	w := &walker{t: t, e: e, token: admin, s: s, sel: newSelector(s),
		real: map[string]bool{}, planned: map[string]bool{}, queried: map[string]bool{}}
	until := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(within); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited %v for %s", within, what)
			}
		}
	}
	phase := func(name string) string {
		d := e.MustGQL(admin, `query($n: String!) { machine(name: $n) { phase } }`, map[string]any{"n": name})
		mm, _ := d["machine"].(map[string]any)
		if mm == nil {
			return ""
		}
		return mm["phase"].(string)
	}
	// taskEnds waits for the member's latest maintenance task to be seen to end, SUCCEEDED.
	taskEnds := func(name, id string) {
		t.Helper()
		var outcome any
		until(name+"'s maintenance task "+id+" to end", 3*time.Minute, func() bool {
			d := e.MustGQL(admin, `query($n: String!) { maintenanceTasks(name: $n) { id outcome message } }`, map[string]any{"n": name})
			task, _ := byKey(d["maintenanceTasks"], "id", id).(map[string]any)
			if task == nil {
				return false
			}
			outcome = task["outcome"]
			return outcome != nil
		})
		if outcome != "SUCCEEDED" {
			t.Fatalf("%s's maintenance task %s ended %v", name, id, outcome)
		}
	}

	w.change("setPlacementGuard", map[string]any{"enabled": true})
	w.change("createIdentity", map[string]any{"name": "robot", "permissions": []string{"VIEW_INFRASTRUCTURE"}, "expiresIn": "30d"})

	// A second cluster, registered beside the one of APELORA_INCUS_* (default).
	rack2 := incuslab.StartWith(t, incuslab.Options{Members: 1, Identity: lab.Identity()})
	w.change("registerCluster", map[string]any{"name": "rack2", "url": rack2.URL, "clusterCertificate": rack2.ClusterCertificatePEM()})

	// The bootstrap member: registered, then admitted (it is where evacuated instances go).
	w.change("registerMachine", map[string]any{"name": m1.Name, "provisioner": "MANUAL", "description": "the bootstrap member"})
	w.change("admitMember", map[string]any{"name": m1.Name})

	// A manual machine: approved (a join token), revoked, forgotten.
	w.change("registerMachine", map[string]any{"name": "node-b", "provisioner": "MANUAL"})
	w.change("approveEnrolment", map[string]any{"name": "node-b"})
	w.change("revokeJoinToken", map[string]any{"name": "node-b"})
	w.change("unregisterMachine", map[string]any{"name": "node-b"})

	// The MAAS path.
	w.change("registerMachine", map[string]any{"name": "node-a", "provisioner": "MAAS", "maasSystemId": "wlk001"})
	w.change("commissionMachine", map[string]any{"systemId": "wlk001", "tests": []string{"smartctl-validate"}})
	m.Clock.Advance(time.Minute) // commissioned, tests running
	m.Clock.Advance(time.Minute) // tests passed: Ready
	w.change("runHardwareTests", map[string]any{"systemId": "wlk001", "hostname": "node-a", "tests": []string{"smartctl-validate"}})
	m.Clock.Advance(time.Minute) // tests passed: Ready again
	w.change("setHardwareProfile", map[string]any{"profile": "lab-fit", "architecture": arch, "description": "what every lab host has", "minCpuCores": 1})
	w.change("assignHardwareProfile", map[string]any{"machine": "node-a", "profile": "lab-fit"})

	host := lab.StartUnjoined(t, "node-a")
	boots := make(chan boot, 1)
	bootDir := t.TempDir()
	m.OnDeploy(func(systemID string, userData []byte) {
		out, err := cloudInit(context.Background(), filepath.Join(bootDir, systemID), userData, lab, host)
		boots <- boot{systemID, out, err}
	})
	w.change("installOperatingSystem", map[string]any{"name": "node-a", "series": "noble"})
	m.Clock.Advance(time.Minute) // deployed: first boot runs the user data
	select {
	case b := <-boots:
		if b.err != nil {
			t.Fatalf("the user data on first boot: %v\n%s", b.err, b.output)
		}
	case <-time.After(4 * time.Minute):
		t.Fatal("the deployed machine did not boot")
	}
	lab.AddMember(host)
	until("node-a to be HELD", time.Minute, func() bool { return phase("node-a") == "HELD" })
	w.change("admitMember", map[string]any{"name": "node-a"})

	// Fencing and a rolling reboot, recorded (no worker drives it here).
	w.change("setFenceMapping", map[string]any{"member": "node-a", "maasSystemId": "wlk001", "hardwareUuid": uuid})
	rr := w.change("startRollingReboot", map[string]any{"members": []string{"node-a"}})
	rrID, _ := rr["rollingReboot"].(map[string]any)["id"].(string)
	w.change("pauseRollingReboot", map[string]any{"id": rrID})
	w.change("resumeRollingReboot", map[string]any{"id": rrID})
	w.change("cancelRollingReboot", map[string]any{"id": rrID})

	// Maintenance, with an instance to move.
	cli("init", "--empty", "c1", "-s", incuslab.Pool, "--target", "node-a")
	ev := w.change("evacuateMember", map[string]any{"name": "node-a"})
	if task, _ := ev["task"].(map[string]any); task != nil {
		taskEnds("node-a", task["id"].(string))
	}
	until("node-a to be EVACUATED", time.Minute, func() bool { return phase("node-a") == "EVACUATED" })
	rs := w.change("restoreMember", map[string]any{"name": "node-a"})
	if task, _ := rs["task"].(map[string]any); task != nil {
		taskEnds("node-a", task["id"].(string))
	}
	until("node-a to be ADMITTED again", time.Minute, func() bool { return phase("node-a") == "ADMITTED" })

	// Every query, with every kind of object there: a signed checkpoint and the drift
	// watcher's round included.
	until("a signed audit checkpoint", time.Minute, func() bool {
		return e.MustGQL(admin, `{ auditCheckpoint { treeSize } }`, nil)["auditCheckpoint"] != nil
	})
	until("the drift watcher's first round", time.Minute, func() bool {
		return e.MustGQL(admin, `{ driftWatcher { lastRoundAt } }`, nil)["driftWatcher"] != nil
	})
	firstEvent := e.Scalar(`SELECT min(id)::text FROM audit_events`).(string)
	args := map[string]map[string]any{
		"auditProof":       {"id": firstEvent},
		"hardwareProfile":  {"name": "lab-fit"},
		"machine":          {"name": "node-a"},
		"maintenanceTasks": {"name": "node-a"},
		"memberOperations": {"name": "node-a"},
		"admissionReport":  {"name": "node-a"},
	}
	w.queries("the lab full", args, []string{"machine", "hardwareProfile", "rollingReboot", "auditCheckpoint", "driftWatcher"})

	// Undo it all.
	cli("delete", "c1")
	w.change("removeFenceMapping", map[string]any{"member": "node-a"})
	w.change("clearHardwareProfile", map[string]any{"machine": "node-a"})
	w.change("removeHardwareProfile", map[string]any{"profile": "lab-fit"})
	w.change("removeMember", map[string]any{"name": "node-a"})
	w.change("releaseMachine", map[string]any{"systemId": "wlk001", "comment": "back to the pool"})
	m.Clock.Advance(time.Minute) // released: Ready
	w.change("unregisterMachine", map[string]any{"name": "node-a"})
	w.change("revokeIdentity", map[string]any{"name": "robot"})
	w.change("removeCluster", map[string]any{"name": "rack2"})
	w.change("setPlacementGuard", map[string]any{"enabled": false})
	args["machine"] = map[string]any{"name": m1.Name}
	args["admissionReport"] = map[string]any{"name": m1.Name}
	w.queries("the lab emptied", args, []string{"machine", "rollingReboot", "auditCheckpoint", "driftWatcher"})

	// Every mutation and query of the schema was asked: a new one needs its step here.
	var missing []string
	for _, f := range schemaRootFields(s.Mutation) {
		if !w.real[f.Name] {
			missing = append(missing, f.Name+" (made)")
		}
		if !w.planned[f.Name] {
			missing = append(missing, f.Name+" (planned)")
		}
	}
	for _, f := range schemaRootFields(s.Query) {
		if !w.queried[f.Name] {
			missing = append(missing, f.Name+" (queried)")
		}
	}
	if len(missing) > 0 {
		t.Errorf("never answered without an error: %s; drive each in this test", strings.Join(missing, ", "))
	}
	if len(w.sel.cut) > 0 {
		cut := make([]string, 0, len(w.sel.cut))
		for f := range w.sel.cut {
			cut = append(cut, f)
		}
		sort.Strings(cut)
		t.Logf("fields below the walk's depth bound (%d), not asked: %s", walkDepth, strings.Join(cut, ", "))
	}
	t.Logf("asked every field of %d mutations (each planned and made) and %d queries", len(w.real), len(w.queried))
}
