package e2e

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The end-to-end tests run in parallel, as many at once as the machine holds: most of
// their time is waiting (Incus calling a member offline, a lease lapsing, a worker's next
// round, a browser's next page), not computing. Each test begins with parallel(t, …),
// which says what it needs; a scheduler here starts it when that is free:
//
//   - a share of the machine, in slots: 1 for most tests, 2 for a browser or a Patroni lab;
//     APELORA_E2E_PARALLEL slots in all, or go test's -parallel when given, else
//     defaultSlots (measured on the 2-core machine CI runs on, issue 26.6);
//   - Chromium and Patroni labs, one of each at a time;
//   - lasts(s): the test takes about s seconds alone (measured). The longest start first
//     (a run does not end with one long test alone), and the tests sharing Chromium or
//     Patroni count as one long test each: they run one after another.
//
// Tests wait for one another in the scheduler, not in go test's -parallel, which TestMain
// raises unless it is given (`go test -parallel 1 ./e2e/` runs them one by one). A test
// that must not overlap others does not call parallel and says why in a `// serial:`
// comment; TestEveryTestSaysHowItRuns holds every test to one or the other.

// defaultSlots fits the 2-core machine CI runs on: with 6 the machine is busy most of the
// run and no test was seen to suffer from it (issue 26.6).
const defaultSlots = 6

// usualSeconds is what a test without lasts is taken to last.
const usualSeconds = 5

// need is what a test needs of the machine.
type need struct {
	slots            int
	browser, patroni bool
	seconds          int
}

type option func(*need)

var (
	// browser: the test drives Chromium (web/console/e2e).
	browser option = func(n *need) { n.browser, n.slots = true, max(n.slots, 2) }
	// patroni: the test runs a Patroni lab (etcd and two PostgreSQL servers).
	patroni option = func(n *need) { n.patroni, n.slots = true, max(n.slots, 2) }
)

// lasts: the test takes about s seconds when it runs alone on the 2-core machine, as
// measured (CI prints the slowest); what the scheduler starts first.
func lasts(s int) option { return func(n *need) { n.seconds = s } }

// parallel runs t in parallel with the other tests once what it needs is free, and gives
// it back when t and its cleanups are done. Call it first, from the test's own goroutine.
func parallel(t *testing.T, opts ...option) {
	t.Helper()
	n := need{slots: 1, seconds: usualSeconds}
	for _, o := range opts {
		o(&n)
	}
	order := sched.register()
	t.Parallel()
	w := sched.wait(n, order)
	t.Cleanup(func() { sched.release(w) })
	// scripts/test.sh reads this line to tell a test's own time from its wait.
	t.Logf("e2e: started after waiting %.3fs for the scheduler (%d of %d slots busy)", w.waited().Seconds(), w.busyAtStart, sched.slots)
}

type waiter struct {
	need        need
	order       int
	ready       chan struct{}
	arrived     time.Time
	started     time.Time
	busyAtStart int
}

func (w *waiter) waited() time.Duration { return w.started.Sub(w.arrived) }

type scheduler struct {
	mu sync.Mutex
	// slots is the machine's share in all; free what is not held.
	slots, free int
	// gate is how many tests may reach wait at once (go test's -parallel): until that many
	// or every registered test has arrived nothing starts, so the first to start are the
	// first in priority, not the first to arrive.
	gate                 int
	registered, arrived  int
	open                 bool
	browserBusy, patBusy bool
	waiting              []*waiter
	running, mostRunning int
	ran                  int
	began                time.Time
}

var sched = &scheduler{slots: defaultSlots, free: defaultSlots, gate: 1 << 30}

func (s *scheduler) configure(slots, gate int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots, s.free, s.gate = max(slots, 1), max(slots, 1), max(gate, 1)
}

// register counts a test that will wait, in the order tests are declared.
func (s *scheduler) register() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registered++
	return s.registered
}

func (s *scheduler) wait(n need, order int) *waiter {
	n.slots = min(n.slots, s.slots)
	w := &waiter{need: n, order: order, ready: make(chan struct{}), arrived: time.Now()}
	s.mu.Lock()
	if s.began.IsZero() {
		s.began = w.arrived
	}
	s.arrived++
	s.waiting = append(s.waiting, w)
	s.dispatch()
	s.mu.Unlock()
	<-w.ready
	return w
}

func (s *scheduler) release(w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free += w.need.slots
	if w.need.browser {
		s.browserBusy = false
	}
	if w.need.patroni {
		s.patBusy = false
	}
	s.running--
	s.dispatch()
}

// dispatch starts, longest first (see lasts) then as declared, every waiting test whose
// needs are free. Called with s.mu held.
func (s *scheduler) dispatch() {
	if !s.open {
		if s.arrived < min(s.registered, s.gate) {
			return
		}
		s.open = true
	}
	// Tests that share Chromium or Patroni run one after another: each such test counts
	// as long as all of them that are still waiting.
	var browserLeft, patroniLeft int
	for _, w := range s.waiting {
		if w.need.browser {
			browserLeft += w.need.seconds
		}
		if w.need.patroni {
			patroniLeft += w.need.seconds
		}
	}
	key := func(w *waiter) int {
		k := w.need.seconds
		if w.need.browser {
			k = max(k, browserLeft)
		}
		if w.need.patroni {
			k = max(k, patroniLeft)
		}
		return k
	}
	slices.SortStableFunc(s.waiting, func(a, b *waiter) int {
		if ka, kb := key(a), key(b); ka != kb {
			return kb - ka
		}
		return a.order - b.order
	})
	left := s.waiting[:0]
	for _, w := range s.waiting {
		fits := w.need.slots <= s.free && !(w.need.browser && s.browserBusy) && !(w.need.patroni && s.patBusy)
		if !fits {
			left = append(left, w)
			continue
		}
		s.free -= w.need.slots
		s.browserBusy = s.browserBusy || w.need.browser
		s.patBusy = s.patBusy || w.need.patroni
		s.running++
		s.ran++
		s.mostRunning = max(s.mostRunning, s.running)
		w.started, w.busyAtStart = time.Now(), s.slots-s.free-w.need.slots
		close(w.ready)
	}
	s.waiting = left
}

func (s *scheduler) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ran == 0 {
		return ""
	}
	return fmt.Sprintf("e2e: %d tests ran in parallel on %d slots, at most %d at once, in %s",
		s.ran, s.slots, s.mostRunning, time.Since(s.began).Round(time.Second))
}

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	slots, gate := defaultSlots, 1<<30
	if given {
		p, _ := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
		slots, gate = p, p
	} else if err := flag.Set("test.parallel", strconv.Itoa(gate)); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	if v := os.Getenv("APELORA_E2E_PARALLEL"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "e2e: APELORA_E2E_PARALLEL=%q: give a number of slots, 1 or more\n", v)
			os.Exit(2)
		}
		slots = n
	}
	sched.configure(slots, gate)
	code := m.Run()
	removeBuilds()
	if s := sched.summary(); s != "" {
		fmt.Println(s)
	}
	os.Exit(code)
}

// TestEveryTestSaysHowItRuns: every test of the package starts with parallel(t, …), or
// has a `// serial:` comment saying why it runs alone; a new test cannot slip into the
// sequential part of the run unnoticed.
func TestEveryTestSaysHowItRuns(t *testing.T) {
	parallel(t)
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	fset := token.NewFileSet()
	tests := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			tests++
			if fn.Doc != nil && strings.Contains(fn.Doc.Text(), "serial:") {
				continue
			}
			if len(fn.Body.List) > 0 {
				if call, ok := fn.Body.List[0].(*ast.ExprStmt); ok {
					if c, ok := call.X.(*ast.CallExpr); ok {
						if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "parallel" {
							continue
						}
					}
				}
			}
			t.Errorf("%s: %s neither starts with parallel(t, …) nor says `// serial: why` above it", fset.Position(fn.Pos()), fn.Name.Name)
		}
	}
	if tests < 100 {
		t.Fatalf("found %d tests; run from the e2e folder", tests)
	}
}
