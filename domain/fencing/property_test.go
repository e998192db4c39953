package fencing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"
)

// history is one generated cluster history: members going offline and coming back, dead
// machines, MAAS going away, mappings changing, wrong mappings, machines whose power-off is
// accepted but never happens, manual power, workers dying before or after sending a
// power-off, database restarts and gaps in observation. The real worker loop runs on it.
type history struct {
	seed     uint64
	r        *rand.Rand
	clk      *clock
	sq       *seq
	st       *memStore
	cl       *fakeCluster
	ma       *fakeMAAS
	w        *Worker
	limits   Limits
	members  []string
	truth    map[string]string // member → real hardware UUID
	dead     map[string]bool   // machine powered off (its daemon stopped)
	mapLog   []mapChange
	lease    Lease
	since    time.Time
	observed int // rounds that observed the members
}

type mapChange struct {
	seq    int
	member string
	m      *Mapping // nil: removed
}

// memberOf maps a system id back to its member (system ids are fixed per member).
func memberOf(systemID string) string { return strings.TrimPrefix(systemID, "sys") }

func newHistory(seed uint64) *history {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	clk := &clock{t: t0}
	sq := &seq{}
	h := &history{seed: seed, r: r, clk: clk, sq: sq, st: newMemStore(sq, clk.now),
		cl:    &fakeCluster{now: clk.now, statuses: map[string]string{}},
		ma:    &fakeMAAS{seq: sq, now: clk.now, machines: map[string]*fakeMachine{}, rand: r.Float64},
		truth: map[string]string{}, dead: map[string]bool{}}
	confirm := time.Duration(1+r.IntN(3)) * 15 * time.Second
	h.limits = Limits{
		OfflineAfter:      time.Duration(1+r.IntN(6)) * 10 * time.Second,
		ConfirmTimeout:    confirm,
		Cooldown:          confirm + time.Duration(r.IntN(10))*30*time.Second,
		MaxObservationGap: 45 * time.Second,
		Settle:            time.Duration(r.IntN(4)) * 10 * time.Second,
	}
	n := 2 + r.IntN(6)
	for i := range n {
		name := fmt.Sprintf("m%d", i+1)
		h.members = append(h.members, name)
		mp := mapping(name)
		h.truth[name] = mp.HardwareUUID
		h.cl.statuses[name] = "Online"
		fm := &fakeMachine{uuid: mp.HardwareUUID, powerType: "ipmi", on: true}
		switch x := r.Float64(); {
		case x < 0.10:
			fm.powerType = "manual"
		case x < 0.25:
			fm.ineffective = true
		case x < 0.40:
			fm.flaky = 0.3
		}
		h.ma.machines[mp.SystemID] = fm
		if r.Float64() < 0.85 {
			h.setMapping(name, r.Float64() < 0.1)
		}
	}
	h.ma.onPowerOff = func(id string) {
		m := memberOf(id)
		h.dead[m] = true
		h.cl.statuses[m] = "Offline"
	}
	h.w = &Worker{ID: "w", Limits: h.limits, Poll: 10 * time.Second, DrillInterval: 5 * time.Minute,
		Cluster: h.cl, MAAS: h.ma, Drills: h.st, Leadership: h.st, Log: discard}
	return h
}

func (h *history) setMapping(member string, wrongUUID bool) {
	mp := mapping(member)
	if wrongUUID {
		mp.HardwareUUID = fmt.Sprintf("deadbeef-0000-4000-8000-%012d", h.r.IntN(1e9))
	}
	h.st.setMapping(mp)
	h.mapLog = append(h.mapLog, mapChange{seq: h.sq.next(), member: member, m: &mp})
}

func (h *history) removeMapping(member string) {
	h.st.removeMapping(member)
	h.mapLog = append(h.mapLog, mapChange{seq: h.sq.next(), member: member})
}

// mappingAt is the member's mapping as of sequence number s.
func (h *history) mappingAt(member string, s int) *Mapping {
	var m *Mapping
	for _, c := range h.mapLog {
		if c.seq > s {
			break
		}
		if c.member == member {
			m = c.m
		}
	}
	return m
}

func (h *history) step() {
	r := h.r
	h.clk.advance(time.Duration(1+r.IntN(15)) * time.Second)
	// The world changes.
	for _, m := range h.members {
		switch {
		case h.dead[m]:
			if r.Float64() < 0.01 { // someone powers it on again
				h.dead[m] = false
				h.ma.machines["sys"+m].on = true
				h.cl.statuses[m] = "Online"
			}
		case h.cl.statuses[m] == "Online" && r.Float64() < 0.04:
			h.cl.statuses[m] = "Offline"
		case h.cl.statuses[m] == "Offline" && r.Float64() < 0.05:
			h.cl.statuses[m] = "Online"
		}
	}
	if r.Float64() < 0.03 {
		m := h.members[r.IntN(len(h.members))]
		if r.Float64() < 0.3 {
			h.removeMapping(m)
		} else {
			h.setMapping(m, r.Float64() < 0.2)
		}
	}
	if r.Float64() < 0.03 {
		h.ma.down = !h.ma.down
	}
	if r.Float64() < 0.02 {
		h.cl.down = !h.cl.down
	}
	switch x := r.Float64(); {
	case x < 0.02:
		h.st.dropLeader() // the database restarted, or the worker died
	case x < 0.04:
		h.ma.dropPowerOff = true // the next power-off is recorded but the worker dies before sending it
	case x < 0.05:
		h.st.failAppendKind = KindRequested // the connection dies as a request is recorded
	case x < 0.10:
		return // no worker ran this step
	}
	if h.lease == nil || h.lease.Check(context.Background()) != nil {
		s, _ := h.st.TryLead(context.Background())
		h.lease, h.since = s, h.clk.now()
	}
	if !h.cl.down {
		h.observed++
	}
	if err := h.w.Round(context.Background(), h.lease, h.since); err != nil {
		h.lease = nil
	}
	if r.Float64() < 0.2 {
		_ = h.w.DrillDue(context.Background())
	}
}

// outcomeCounts tallies what the histories produced, to show the generator reaches every
// branch.
type outcomeCounts map[string]int

func TestPropertyWorkerHistories(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 100
	}
	counts := outcomeCounts{}
	for i := range n {
		h := newHistory(uint64(i))
		for range 200 {
			h.step()
		}
		h.check(t, counts)
		if t.Failed() {
			t.Fatalf("history seed %d failed (limits %s, members %v)", h.seed, h.limits.Describe(), h.members)
		}
	}
	t.Logf("outcomes over %d histories: %v", n, counts)
	for _, k := range []string{"CONFIRMED", "NOT_CONFIRMED/POWER_NOT_OFF", "NOT_CONFIRMED/POWER_NOT_QUERYABLE", "NOT_CONFIRMED/MAAS_UNAVAILABLE",
		"REFUSED/TOO_MANY_OFFLINE", "REFUSED/COOLDOWN", "REFUSED/UUID_MISMATCH", "REFUSED/NOT_MAPPED", "REFUSED/MAAS_UNAVAILABLE",
		"BACK_ONLINE", "power_off", "dropped-before-send"} {
		if counts[k] == 0 {
			t.Errorf("no history produced %s: the generator does not reach it", k)
		}
	}
}

// check verifies the limits over the whole history, from the logs of what the worker saw
// (observations), recorded (events) and did (MAAS calls).
func (h *history) check(t *testing.T, counts outcomeCounts) {
	t.Helper()
	st, ma := h.st, h.ma
	for _, e := range st.events {
		k := string(e.Kind)
		if e.Reason != "" {
			k += "/" + string(e.Reason)
		}
		counts[k]++
	}
	// Sequence numbers of events and calls, merged, tell what came first.
	type entry struct {
		seq  int
		ev   *Event
		call *maasCall
	}
	var log []entry
	for i := range st.events {
		log = append(log, entry{seq: st.eventSeq[i], ev: &st.events[i]})
	}
	for i := range ma.calls {
		log = append(log, entry{seq: ma.calls[i].seq, call: &ma.calls[i]})
	}
	sort.Slice(log, func(i, j int) bool { return log[i].seq < log[j].seq })

	pending := map[string]*Event{}   // member → unconfirmed request
	fenced := map[string]time.Time{} // member → the request time of its latest confirmed power-off
	lastReq := map[string]*Event{}   // member → latest request
	sentFor := map[int64]int{}       // request id → power-offs sent for it
	var lastCall *maasCall           // the MAAS call before the current one
	var readsOK = map[string]bool{}  // system id → the last read answered the expected UUID
	requested := 0
	for _, en := range log {
		if c := en.call; c != nil {
			m := memberOf(c.systemID)
			switch c.op {
			case "read":
				// Is the answered UUID what the worker expects for this machine (its mapping,
				// or its pending request)?
				want := map[string]bool{}
				if mp := h.mappingAt(m, c.seq); mp != nil {
					want[mp.HardwareUUID] = true
				}
				if p := pending[m]; p != nil {
					want[p.Details["hardwareUuid"].(string)] = true
				}
				readsOK[c.systemID] = c.err == nil && want[c.uuid]
			case "query", "power_off":
				// The previous MAAS call must be a read of the same machine that reported the
				// expected hardware UUID.
				if lastCall == nil || lastCall.op != "read" || lastCall.systemID != c.systemID || !readsOK[c.systemID] {
					t.Errorf("%s of %s at %v was not preceded by a read reporting the mapped hardware UUID (previous call %+v)", c.op, c.systemID, c.at, lastCall)
				}
			}
			if c.op == "power_off" {
				counts["power_off"]++
				req := lastReq[m]
				switch {
				case req == nil || !req.At.Equal(c.at) || pending[m] != req:
					t.Errorf("power-off of %s at %v without a request recorded first in the same round (request %+v)", c.systemID, c.at, req)
				case sentFor[req.ID] > 0:
					t.Errorf("request %d for %s sent twice", req.ID, m)
				default:
					sentFor[req.ID]++
				}
			}
			lastCall = c
			continue
		}
		e := en.ev
		switch e.Kind {
		case KindRequested:
			requested++
			h.checkRequest(t, e, en.seq, pending, lastReq)
			// A member confirmed off stays fenced until Incus lists it online again.
			if at, ok := fenced[e.Member]; ok && !h.seenOnline(e.Member, at, e.At) {
				t.Errorf("request for %s at %v: it was confirmed off (requested %v) and Incus has not listed it online since", e.Member, e.At, at)
			}
			pending[e.Member], lastReq[e.Member] = e, e
		case KindConfirmed:
			req := pending[e.Member]
			if req == nil {
				t.Errorf("%s confirmed at %v without a pending request", e.Member, e.At)
				continue
			}
			// A read after the request said off.
			ok := false
			for _, c := range ma.calls {
				if c.op == "query" && c.systemID == req.Details["maasSystemId"] && c.state == "off" && c.err == nil &&
					c.seq > st.eventSeq[req.ID-1] && c.seq < en.seq {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s confirmed at %v without a power-state read saying off after request %d", e.Member, e.At, req.ID)
			}
			fenced[e.Member] = req.At
			delete(pending, e.Member)
		case KindNotConfirmed:
			if pending[e.Member] == nil {
				t.Errorf("%s reported not confirmed without a pending request", e.Member)
			}
			delete(pending, e.Member)
		}
	}
	counts["dropped-before-send"] += requested - len(sentFor)
}

// seenOnline reports whether a read of the members between from and to listed member as
// anything but Offline.
func (h *history) seenOnline(member string, from, to time.Time) bool {
	for _, o := range h.cl.log {
		if !o.failed && o.at.After(from) && !o.at.After(to) && o.statuses[member] != "Offline" {
			return true
		}
	}
	return false
}

// checkRequest verifies the limits at the moment a power-off request was recorded.
func (h *history) checkRequest(t *testing.T, e *Event, seq int, pending, lastReq map[string]*Event) {
	t.Helper()
	m, at := e.Member, e.At
	// Mapped, with the UUID the request carries.
	mp := h.mappingAt(m, seq)
	if mp == nil || mp.HardwareUUID != e.Details["hardwareUuid"] || mp.SystemID != e.Details["maasSystemId"] {
		t.Errorf("request for %s at %v does not match its mapping %+v (details %v)", m, at, mp, e.Details)
	}
	// The cooldown runs from the previous request.
	if prev := lastReq[m]; prev != nil && at.Sub(prev.At) < h.limits.Cooldown {
		t.Errorf("second request for %s %v after the first (cooldown %v)", m, at.Sub(prev.At), h.limits.Cooldown)
	}
	if pending[m] != nil {
		t.Errorf("request for %s while request %d is unconfirmed", m, pending[m].ID)
	}
	// Offline long enough: observed offline at every look for OfflineAfter, with no gap
	// longer than the limit between looks, and counting only reads made once Incus had
	// answered for the settle period after it last could not be read.
	obs := h.cl.log
	var latest *observation
	var since, prevAt, answering time.Time
	unread := false
	for i := range obs {
		o := &obs[i]
		if o.at.After(at) {
			break
		}
		if o.failed {
			unread, since = true, time.Time{}
			continue
		}
		if unread {
			unread, answering = false, o.at
		}
		latest = o
		switch {
		case o.statuses[m] != "Offline":
			since = time.Time{}
		case !answering.IsZero() && o.at.Sub(answering) < h.limits.Settle:
			since = time.Time{} // not believed yet
		case since.IsZero() || o.at.Sub(prevAt) > h.limits.MaxObservationGap:
			since = o.at
		}
		prevAt = o.at
	}
	if latest == nil || since.IsZero() || at.Sub(since) < h.limits.OfflineAfter {
		t.Errorf("request for %s at %v, but it was observed offline continuously only since %v (need %v)", m, at, since, h.limits.OfflineAfter)
	}
	// Fewer than half of the members count as offline: offline at the last look, or with a
	// request not yet confirmed.
	counted := map[string]bool{}
	for name, s := range latest.statuses {
		counted[name] = s == "Offline"
	}
	for name := range pending {
		counted[name] = true
	}
	off := 0
	for _, o := range counted {
		if o {
			off++
		}
	}
	if off*2 >= len(counted) {
		t.Errorf("request for %s at %v with %d of %d members counted offline", m, at, off, len(counted))
	}
}
