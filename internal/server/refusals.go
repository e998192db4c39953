package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/logging"
)

// Refusals that repeat (an address out of tries, failed sign-ins, an identity over its
// websockets or subscriptions) are written to the audit trail by refusalLog, bounded per
// window and with their true counts:
//
//   - The first refusal of a key (an address, an identity and its limit) that had none for
//     a window is written at once, counting 1: the trail shows an attack as it starts.
//   - Every later refusal is counted, and when the window ends one event per key says how
//     many came, from when to when. So the counts of a key's events add up to every
//     refusal, none counted twice or lost (the window's last events are written when the
//     server stops, too).
//   - RefusalRowsPerWindow keys of a kind get events of their own in a window; past it
//     (a flood from many addresses) one summary event for the kind says how many keys and
//     refusals there were, listing the keys with the most.
//
// So a kind writes at most 2 × RefusalRowsPerWindow events per window, whatever comes.
const (
	// RefusalRowsPerWindow is how many keys of a kind get audit events of their own in one
	// window; past it one summary event stands for all of them.
	RefusalRowsPerWindow = 10
	// refusalSummaryKeys is how many keys (those with the most refusals) a summary lists.
	refusalSummaryKeys = 10
	// maxRefusalKeys bounds the keys counted at once; past it new ones count under one.
	maxRefusalKeys = 10000
	// otherKeys is the key the refusals of keys past maxRefusalKeys count under.
	otherKeys = "(other)"
)

// refusalKind is one kind of repeated refusal: its audit action and the words of its
// details.
type refusalKind struct {
	action string
	// key names the key in an event's details ("address"; "" when the actor is the key, as
	// for an identity); keys names how many there were in a summary ("addresses"); count
	// names how many refusals ("refused", "failed").
	key, keys, count string
}

var (
	// rateLimitedRefusals are requests refused 429 because their address was out of tries.
	rateLimitedRefusals = &refusalKind{action: RateLimited, key: "address", keys: "addresses", count: "refused"}
	// failedSignIns are console sign-ins (and session cookies) that failed to authenticate.
	failedSignIns = &refusalKind{action: SignInFailed, key: "address", keys: "addresses", count: "failed"}
	// identityLimitRefusals are websockets and subscriptions refused to an identity at its
	// limit (keyed by the identity and the limit; the identity is the events' actor).
	identityLimitRefusals = &refusalKind{action: IdentityLimited, keys: "identities", count: "refused"}
)

// refusalEvent is one audit event of refusalLog.
type refusalEvent struct {
	ctx     context.Context // the request's (its id), or a fresh one at a window's end
	kind    *refusalKind
	actor   string
	message string
	details map[string]any
}

type tallyKey struct {
	kind *refusalKind
	key  string
}

// tally is what refusalLog knows of one key.
type tally struct {
	actor   string
	details map[string]any // facts of the key besides the count (an identity's limit)
	last    time.Time      // its last refusal
	// Refusals not yet in an event: how many, the first one's message, from when to when.
	pending  int
	message  string
	from, to time.Time
}

// refusalLog counts repeated refusals and writes their audit events (see above).
type refusalLog struct {
	window  time.Duration
	perKind int
	write   func(refusalEvent)
	now     func() time.Time

	mu     sync.Mutex
	end    time.Time // the current window's end; zero: none open
	opened map[*refusalKind]int
	keys   map[tallyKey]*tally
	timer  *time.Timer
	closed bool
}

// newRefusalLog writes with write; when stop ends, what is counted is written at once.
func newRefusalLog(stop context.Context, window time.Duration, write func(refusalEvent)) *refusalLog {
	if window <= 0 {
		window = RateLimitWindow
	}
	l := &refusalLog{window: window, perKind: RefusalRowsPerWindow, write: write, now: time.Now,
		opened: map[*refusalKind]int{}, keys: map[tallyKey]*tally{}}
	if stop != nil {
		context.AfterFunc(stop, l.close)
	}
	return l
}

// note counts one refusal of key. ctx is the refused request's; details are facts of the
// key (the same for each of its refusals) that its events carry.
func (l *refusalLog) note(ctx context.Context, kind *refusalKind, key, actor, message string, details map[string]any) {
	l.mu.Lock()
	now := l.now()
	due := l.rollLocked(now)
	if l.end.IsZero() {
		l.end = now.Add(l.window)
	}
	k := tallyKey{kind, key}
	t := l.keys[k]
	if t == nil {
		if len(l.keys) >= maxRefusalKeys {
			k.key, actor, details = otherKeys, audit.Anonymous, nil
			t = l.keys[k]
		}
		if t == nil {
			t = &tally{actor: actor, details: details}
			l.keys[k] = t
		}
	}
	quiet := t.last.IsZero() || now.Sub(t.last) >= l.window
	t.last = now
	var first *refusalEvent
	if quiet && t.pending == 0 && l.opened[kind] < l.perKind && !l.closed {
		l.opened[kind]++
		first = &refusalEvent{ctx: ctx, kind: kind, actor: t.actor, message: message, details: l.detailsOf(k, t, 1, now, now)}
	} else {
		if t.pending == 0 {
			t.message, t.from = message, now
		}
		t.pending++
		t.to = now
		l.armLocked(now)
	}
	l.mu.Unlock()
	l.writeAll(due)
	if first != nil {
		l.write(*first)
	}
}

// detailsOf are the details of an event of k counting n refusals from from to to.
func (l *refusalLog) detailsOf(k tallyKey, t *tally, n int, from, to time.Time) map[string]any {
	d := map[string]any{k.kind.count: n, "window": l.window.String(), "from": stamp(from), "to": stamp(to)}
	if k.kind.key != "" {
		d[k.kind.key] = k.key
	}
	for name, v := range t.details {
		d[name] = v
	}
	return d
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// armLocked makes sure the window's events are written at its end.
func (l *refusalLog) armLocked(now time.Time) {
	if l.timer == nil && !l.closed {
		l.timer = time.AfterFunc(l.end.Sub(now), l.tick)
	}
}

func (l *refusalLog) tick() {
	l.mu.Lock()
	l.timer = nil
	due := l.rollLocked(l.now())
	l.mu.Unlock()
	l.writeAll(due)
}

// close writes what is counted, at once: the server is stopping.
func (l *refusalLog) close() {
	l.mu.Lock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	due := l.flushLocked(l.now())
	l.mu.Unlock()
	l.writeAll(due)
}

func (l *refusalLog) writeAll(events []refusalEvent) {
	for _, e := range events {
		l.write(e)
	}
}

// rollLocked ends the window when now is past it: it returns the window's events and
// forgets the keys no longer needed to tell a new episode from a continuing one.
func (l *refusalLog) rollLocked(now time.Time) []refusalEvent {
	if l.end.IsZero() || now.Before(l.end) {
		return nil
	}
	return l.flushLocked(now)
}

func (l *refusalLog) flushLocked(now time.Time) []refusalEvent {
	var out []refusalEvent
	byKind := map[*refusalKind][]tallyKey{}
	for k, t := range l.keys {
		if t.pending > 0 {
			byKind[k.kind] = append(byKind[k.kind], k)
		}
	}
	for kind, keys := range byKind {
		// Most refusals first (then by key), so a summary lists the heaviest.
		slices.SortFunc(keys, func(a, b tallyKey) int {
			return cmp.Or(cmp.Compare(l.keys[b].pending, l.keys[a].pending), cmp.Compare(a.key, b.key))
		})
		ctx := logging.WithRequestID(context.Background(), logging.NewRequestID())
		if len(keys) <= l.perKind {
			for _, k := range keys {
				t := l.keys[k]
				out = append(out, refusalEvent{ctx: ctx, kind: kind, actor: t.actor, message: t.message, details: l.detailsOf(k, t, t.pending, t.from, t.to)})
			}
		} else {
			out = append(out, l.summaryLocked(ctx, kind, keys))
		}
	}
	for k, t := range l.keys {
		t.pending = 0
		if now.Sub(t.last) >= l.window {
			delete(l.keys, k)
		}
	}
	clear(l.opened)
	l.end = time.Time{}
	if len(l.keys) > 0 {
		// Keys still recent may be refused again: their next refusals belong to a new
		// window, which starts now.
		l.end = now.Add(l.window)
	}
	return out
}

// summaryLocked is the one event of a window in which more keys of kind than perKind
// were refused.
func (l *refusalLog) summaryLocked(ctx context.Context, kind *refusalKind, keys []tallyKey) refusalEvent {
	total := 0
	var from, to time.Time
	most := make([]map[string]any, 0, refusalSummaryKeys)
	for i, k := range keys {
		t := l.keys[k]
		total += t.pending
		if from.IsZero() || t.from.Before(from) {
			from = t.from
		}
		if t.to.After(to) {
			to = t.to
		}
		if i < refusalSummaryKeys {
			entry := map[string]any{kind.count: t.pending}
			if kind.key != "" {
				entry[kind.key] = k.key
			} else {
				entry["identity"] = t.actor
			}
			for n, v := range t.details {
				entry[n] = v
			}
			most = append(most, entry)
		}
	}
	msg := fmt.Sprintf("%d %s from %d %s in one window (more than %d, so one event for all of them); the %d with the most are listed",
		total, kind.action, len(keys), kind.keys, l.perKind, min(len(keys), refusalSummaryKeys))
	return refusalEvent{ctx: ctx, kind: kind, actor: audit.Anonymous, message: msg, details: map[string]any{
		kind.keys: len(keys), kind.count: total, "window": l.window.String(), "from": stamp(from), "to": stamp(to), "most": most}}
}
