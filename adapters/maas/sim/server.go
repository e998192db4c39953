// Package sim is a MAAS 2.0 API simulator for tests and development. It aims
// to be faithful rather than convenient: OAuth PLAINTEXT checks, MAAS's
// paths and op dispatch, the machine JSON shape gomaasapi needs, the state
// rules and error texts of /work/shared/reference/maas-api.md, and power
// behaviour as seen in a real lab (manual power cannot be queried; a
// power-off can be accepted yet change nothing).
//
// Timed transitions run on an injectable Clock; tests use FakeClock.Advance.
package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// User is a MAAS user and its API key (consumer:token:secret).
type User struct {
	Username string
	Email    string
	APIKey   string
	Admin    bool
}

// Durations of timed transitions. Zero fields take DefaultDurations' values.
type Durations struct {
	Commissioning time.Duration
	Testing       time.Duration
	Deploying     time.Duration
	Releasing     time.Duration
	DiskErasing   time.Duration
	// PowerOff is the delay between MAAS accepting power_off and the
	// controller reporting the machine off.
	PowerOff time.Duration
}

// DefaultDurations are short so the binary is pleasant to use by hand.
var DefaultDurations = Durations{
	Commissioning: 3 * time.Second,
	Testing:       2 * time.Second,
	Deploying:     5 * time.Second,
	Releasing:     time.Second,
	DiskErasing:   3 * time.Second,
	PowerOff:      500 * time.Millisecond,
}

// Options configure a Server.
type Options struct {
	Users   []User
	Fixture Fixture
	// Clock drives timed transitions; RealClock when nil.
	Clock Clock
	// AuthNow is the time OAuth timestamps are checked against; time.Now when
	// nil. It is separate from Clock because the client signs with wall time
	// while tests move Clock by minutes.
	AuthNow   func() time.Time
	Durations Durations
	// Version is reported by GET version/; default "3.6.2".
	Version string
	// OnPowerOff runs whenever a controller-backed machine actually goes
	// from on to off (not when power_off is merely accepted). It runs after
	// the simulator's lock is released, on the clock's goroutine.
	OnPowerOff func(systemID string)
	// OnPowerOn runs whenever a controller-backed machine goes from off to on (a power
	// cycle's second half), in a goroutine of its own, as a machine boots on its own.
	OnPowerOn func(systemID string)
	// OnDeploy runs when a deployed machine boots for the first time, with the user data
	// of its deploy (nil when none was given), as cloud-init would run it. It runs in a
	// goroutine of its own, as a machine boots on its own: it may take its time.
	OnDeploy func(systemID string, userData []byte)
	Logger   *slog.Logger
}

// Fault makes the simulator misbehave on purpose.
type Fault int

const (
	FaultNone Fault = iota
	// FaultUnavailable answers 503 with Retry-After: 10, as MAAS does when
	// the rack controller is unreachable.
	FaultUnavailable
	// FaultConflictRetry answers 409 with Retry-After: 5, as MAAS does when
	// its database retries ran out.
	FaultConflictRetry
	// FaultDrop closes the connection without an answer (unreachable MAAS).
	FaultDrop
	// FaultHang never answers; the request ends when the client gives up
	// (its timeout) or the endpoint closes. Models a MAAS that stopped
	// responding, for timeout paths.
	FaultHang
)

// Request is what the simulator recorded about one HTTP request. It never
// holds the Authorization header or any oauth_* parameter; user_data is
// replaced by a placeholder.
type Request struct {
	Method string
	Path   string // URL path without query
	Op     string
	// User is the authenticated user, "" if none.
	User string
	// Form holds the parameters MAAS would read: the query for GETs, the
	// body for POSTs (op and oauth_* removed).
	Form url.Values
	// Status is the HTTP status answered (0 when the connection was dropped).
	Status int
}

// FormKeys returns the parameter names sent, sorted.
func (r Request) FormKeys() []string { return sortedKeys(r.Form) }

// Server is a simulated MAAS region. Use Handler, Serve or ServeTLS.
type Server struct {
	clock     Clock
	authNow   func() time.Time
	durations Durations
	version   string
	apiHash   string
	log       *slog.Logger

	mu         sync.Mutex
	users      map[string]*userKey // by consumer key
	machines   []*machine          // in creation order (MAAS orders by id)
	byID       map[string]*machine
	config     map[string]any
	nonces     map[string]time.Time
	lastPrune  time.Time
	requests   []Request
	fault      Fault
	faultLeft  int                      // requests left for FailNext; -1 = until cleared
	opFaults   map[string]Fault         // SetOpFault: by op, until cleared
	stall      chan struct{}            // non-nil while Stall holds requests; closed by its release
	holds      map[string]chan struct{} // HoldOp: by op; closed by its release
	held       map[string]int           // HoldOp: requests held now, by op
	onPowerOff func(string)
	onPowerOn  func(string)
	onDeploy   func(string, []byte)
	zones      map[string]int
	nextID     int
}

type userKey struct {
	User
	consumer, token, secret string
}

// NewAPIKey returns a random key in MAAS's shape (18:18:32 characters).
func NewAPIKey() string {
	return randString(18) + ":" + randString(18) + ":" + randString(32)
}

// New builds a simulator from opts.
func New(opts Options) (*Server, error) {
	s := &Server{
		clock:      opts.Clock,
		authNow:    opts.AuthNow,
		durations:  opts.Durations,
		version:    opts.Version,
		log:        opts.Logger,
		users:      map[string]*userKey{},
		byID:       map[string]*machine{},
		nonces:     map[string]time.Time{},
		onPowerOff: opts.OnPowerOff,
		onPowerOn:  opts.OnPowerOn,
		onDeploy:   opts.OnDeploy,
		zones:      map[string]int{"default": 1},
		config: map[string]any{
			"enable_disk_erasing_on_release": false,
			"default_distro_series":          "jammy",
			"default_osystem":                "ubuntu",
			"maas_name":                      "apelora-sim",
		},
	}
	if s.clock == nil {
		s.clock = RealClock()
	}
	if s.authNow == nil {
		s.authNow = time.Now
	}
	if s.version == "" {
		s.version = "3.6.2"
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	d, def := &s.durations, DefaultDurations
	for _, p := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&d.Commissioning, def.Commissioning}, {&d.Testing, def.Testing}, {&d.Deploying, def.Deploying},
		{&d.Releasing, def.Releasing}, {&d.DiskErasing, def.DiskErasing}, {&d.PowerOff, def.PowerOff},
	} {
		if *p.v <= 0 {
			*p.v = p.def
		}
	}
	sum := sha1.Sum([]byte("apelora-maas-sim " + s.version))
	s.apiHash = hex.EncodeToString(sum[:])

	if len(opts.Users) == 0 {
		return nil, errors.New("MAAS simulator: at least one user with an API key is required")
	}
	for _, u := range opts.Users {
		parts := strings.Split(u.APIKey, ":")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return nil, fmt.Errorf("MAAS simulator: user %q: API key must be consumer:token:secret", u.Username)
		}
		if u.Username == "" {
			return nil, errors.New("MAAS simulator: a user has no username")
		}
		if u.Email == "" {
			u.Email = u.Username + "@example.invalid"
		}
		if _, dup := s.users[parts[0]]; dup {
			return nil, fmt.Errorf("MAAS simulator: user %q reuses another user's consumer key", u.Username)
		}
		s.users[parts[0]] = &userKey{User: u, consumer: parts[0], token: parts[1], secret: parts[2]}
	}
	for k, v := range opts.Fixture.Config {
		s.config[k] = v
	}
	for _, sp := range opts.Fixture.Machines {
		if err := s.AddMachine(sp); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// AddMachine adds a machine as MAAS would show it after enlistment.
func (s *Server) AddMachine(sp MachineSpec) error {
	if err := sp.validate(); err != nil {
		return fmt.Errorf("MAAS simulator: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byID[sp.SystemID]; dup {
		return fmt.Errorf("MAAS simulator: duplicate system_id %q", sp.SystemID)
	}
	m := newMachine(sp, s.nextID)
	s.nextID++
	// Results a fixture says earlier runs left: an hour ago, a few minutes each.
	for _, rs := range [][]scriptResult{m.commissioning, m.testing} {
		for i := range rs {
			if rs[i].status != ScriptPending && rs[i].status != ScriptRunning {
				rs[i].started = s.clock.Now().Add(-time.Hour)
				rs[i].ended = rs[i].started.Add(time.Duration(3+i) * time.Minute)
			} else if rs[i].status == ScriptRunning {
				rs[i].started = s.clock.Now()
			}
		}
	}
	if _, ok := s.zones[m.zone]; !ok {
		s.zones[m.zone] = len(s.zones) + 1
	}
	s.machines = append(s.machines, m)
	s.byID[m.systemID] = m
	return nil
}

// SetPowerOffHook replaces Options.OnPowerOff.
func (s *Server) SetPowerOffHook(f func(systemID string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onPowerOff = f
}

// SetPowerOnHook replaces Options.OnPowerOn.
func (s *Server) SetPowerOnHook(f func(systemID string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onPowerOn = f
}

// OnDeploy replaces Options.OnDeploy: f boots each machine that reaches Deployed from now
// on, with its user data.
func (s *Server) OnDeploy(f func(systemID string, userData []byte)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDeploy = f
}

// SetFault makes every following request fail with f until SetFault(FaultNone).
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault, s.faultLeft = f, -1
	if f == FaultNone {
		s.faultLeft = 0
	}
}

// SetOpFault makes every following request with op (power_off, query_power_state, …)
// fail with f until SetOpFault(op, FaultNone); other requests are answered. A request held
// by FaultHang is never acted on: FaultHang on power_off models a caller that died after
// deciding to power a machine off and before MAAS received the command.
func (s *Server) SetOpFault(op string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opFaults == nil {
		s.opFaults = map[string]Fault{}
	}
	if f == FaultNone {
		delete(s.opFaults, op)
		return
	}
	s.opFaults[op] = f
}

// Stall holds every request that arrives until the returned release is called (or its
// client gives up), then answers it as usual: a MAAS that is slow, not down. Release is
// safe to call more than once.
func (s *Server) Stall() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gate := make(chan struct{})
	s.stall = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.stall == gate {
				s.stall = nil
			}
			s.mu.Unlock()
			close(gate)
		})
	}
}

// HoldOp holds every request with op (power_off, …) that arrives, received but not yet
// acted on, until the returned release is called; then each is acted on and answered as
// usual (one whose client gave up meanwhile is dropped, never acted on). Unlike Stall,
// other requests are answered: a caller can be paused while its command is in flight and
// others still read. Held says how many are held now. Release is safe to call more than
// once.
func (s *Server) HoldOp(op string) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds == nil {
		s.holds, s.held = map[string]chan struct{}{}, map[string]int{}
	}
	gate := make(chan struct{})
	s.holds[op] = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.holds[op] == gate {
				delete(s.holds, op)
			}
			s.mu.Unlock()
			close(gate)
		})
	}
}

// Held is the number of requests with op that HoldOp holds now.
func (s *Server) Held(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[op]
}

// hold waits while HoldOp holds op; false: the client gave up, so it is not acted on.
func (s *Server) hold(r *http.Request, op string) bool {
	s.mu.Lock()
	gate := s.holds[op]
	if gate == nil || op == "" {
		s.mu.Unlock()
		return true
	}
	s.held[op]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.held[op]--
		s.mu.Unlock()
	}()
	select {
	case <-gate:
		return true
	case <-r.Context().Done():
		return false
	}
}

// FailNext makes the next n requests fail with f, then behaves again.
func (s *Server) FailNext(n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault, s.faultLeft = f, n
}

// SetConfig sets a MAAS configuration value (enable_disk_erasing_on_release…).
func (s *Server) SetConfig(name string, value any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config[name] = value
}

// Requests returns a copy of the recorded requests.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Form = cloneValues(r.Form)
		out[i] = r
	}
	return out
}

// ResetRequests forgets recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// CountRequests counts recorded requests with this method and op ("" for
// plain reads); method "" matches any method.
func (s *Server) CountRequests(method, op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if (method == "" || r.Method == method) && r.Op == op {
			n++
		}
	}
	return n
}

// Snapshot is the simulator's view of a machine, for test assertions.
type Snapshot struct {
	SystemID      string
	Hostname      string
	Status        int
	StatusName    string
	PowerType     string
	PowerState    string
	Owner         string
	OSystem       string
	DistroSeries  string
	Locked        bool
	HardwareKnown bool
	TestingStatus int
	// LastRelease is what the last accepted release asked for.
	LastRelease ReleaseRecord
	// PowerOffRequests counts accepted power_off calls.
	PowerOffRequests int
	HasUserData      bool
}

// ReleaseRecord is how a release was requested.
type ReleaseRecord struct {
	Requested    bool
	Erase        bool
	SecureErase  bool
	QuickErase   bool
	ConfigForced bool // enable_disk_erasing_on_release was on
}

// Machine returns a snapshot of one machine.
func (s *Server) Machine(systemID string) (Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.byID[systemID]
	if !ok {
		return Snapshot{}, false
	}
	return Snapshot{
		SystemID: m.systemID, Hostname: m.hostname, Status: m.status, StatusName: StatusLabel(m.status),
		PowerType: m.powerType, PowerState: m.powerState, Owner: m.owner, OSystem: m.osystem,
		DistroSeries: m.distroSeries, Locked: m.locked, HardwareKnown: m.hwKnown,
		TestingStatus: aggregate(m.testing, nil), LastRelease: m.lastRelease,
		PowerOffRequests: m.powerOffRequests, HasUserData: m.userData != nil,
	}, true
}

// UserData returns the user data stored by the last deploy. MAAS keeps it but
// never returns it through the API; tests read it here.
func (s *Server) UserData(systemID string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.byID[systemID]; ok && m.userData != nil {
		return append([]byte(nil), m.userData...)
	}
	return nil
}

// Edit changes a machine under the simulator's lock, for test set-up that the
// API cannot do (force a status, lock it, make power-off ineffective…).
func (s *Server) Edit(systemID string, f func(*MachineEdit)) error {
	s.mu.Lock()
	m, ok := s.byID[systemID]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("MAAS simulator: no machine %q", systemID)
	}
	e := &MachineEdit{m: m}
	f(e)
	hooks := s.takeHooks(m)
	s.mu.Unlock()
	s.runHooks(hooks)
	return e.err
}

// MachineEdit is the handle Edit passes to its function.
type MachineEdit struct {
	m   *machine
	err error
}

// SetStatus forces a status and cancels any timed transition.
func (e *MachineEdit) SetStatus(status int) {
	if status < 0 || status >= len(statusLabels) {
		e.err = fmt.Errorf("status %d is not a MAAS status", status)
		return
	}
	e.m.cancelTimer()
	e.m.status = status
}

// SetPowerState sets what the power controller reports. Going from on to off
// on a controller-backed machine fires the power-off hook.
func (e *MachineEdit) SetPowerState(state string) {
	switch state {
	case "on", "off", "unknown", "error":
		e.m.setPower(state)
	default:
		e.err = fmt.Errorf("power state %q (on, off, unknown, error)", state)
	}
}

// SetPowerType sets the machine's power type ("ipmi", "manual", "" for unset…), as an
// administrator editing it in MAAS would: a manual machine's power read answers 400.
func (e *MachineEdit) SetPowerType(t string) { e.m.powerType = t }

// SetPowerOffIneffective makes power_off accepted but never effective.
func (e *MachineEdit) SetPowerOffIneffective(v bool) { e.m.powerOffIneffective = v }

// SetLocked locks or unlocks the machine.
func (e *MachineEdit) SetLocked(v bool) { e.m.locked = v }

// SetOwner sets the owner ("" for none).
func (e *MachineEdit) SetOwner(u string) { e.m.owner = u }

// SetTestOutcome says how future runs of a test script end ("passed",
// "failed", "timedout", "degraded", "skipped").
func (e *MachineEdit) SetTestOutcome(scriptName, outcome string) {
	st, ok := outcomeNames[outcome]
	if _, known := scriptByName(scriptName); !known || !ok {
		e.err = fmt.Errorf("test outcome %s=%s: unknown script or outcome", scriptName, outcome)
		return
	}
	e.m.testOutcomes[scriptName] = st
}

// SetFailures makes the next commissioning, deployment or release fail.
func (e *MachineEdit) SetFailures(commissioning, deployment, release bool) {
	e.m.failCommissioning, e.m.failDeployment, e.m.failRelease = commissioning, deployment, release
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// record strips what must never be stored.
func (s *Server) record(r Request) {
	form := url.Values{}
	for k, vs := range r.Form {
		if k == "op" || strings.HasPrefix(k, "oauth_") {
			continue
		}
		if k == "user_data" {
			vs = []string{fmt.Sprintf("<%d bytes withheld>", len(strings.Join(vs, "")))}
		}
		form[k] = append([]string(nil), vs...)
	}
	r.Form = form
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
	s.log.Info("MAAS API request", "method", r.Method, "path", r.Path, "op", r.Op, "user", r.User,
		"params", strings.Join(r.FormKeys(), ","), "status", r.Status)
}

// Handler serves the MAAS API under /MAAS/.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// ServeHTTP makes Server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serveHTTP(w, r) }

func (s *Server) takeFault(op string) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.opFaults[op]; ok && op != "" {
		return f
	}
	if s.fault == FaultNone || s.faultLeft == 0 {
		return FaultNone
	}
	if s.faultLeft > 0 {
		s.faultLeft--
	}
	return s.fault
}

// machinesSorted returns machines in MAAS's list order.
func (s *Server) machinesSorted() []*machine {
	out := append([]*machine(nil), s.machines...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].internalID < out[j].internalID })
	return out
}
