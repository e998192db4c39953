package identity

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/apelora/fabric/internal/apperr"
)

// SocketRegistry holds this replica's open websockets by identity and by console session,
// and ends those of an identity as soon as it may no longer authenticate: revoked,
// deleted, or past its expiry. Each watched connection context is cancelled with an
// UNAUTHENTICATED *apperr.Error as its cause (see Usable), which the transport turns into
// close code 4403 with that message.
//
// A socket authenticated by a console session (WatchConsoleSession) also ends when that
// session ends: signed out, here or on another replica (ConsoleSessionEnded).
//
// Revocations reach every API replica through PostgreSQL NOTIFY: the store's listener
// calls Changed for each identity notified, ConsoleSessionEnded for each console session
// ended, and CheckAll when notifications may have been lost. Expiry needs no
// notification: each socket has a timer.
type SocketRegistry struct {
	store ByID
	log   *slog.Logger

	mu   sync.Mutex
	open map[int64]map[*socket]struct{}
	// console holds the connections of each console session, by its id.
	console map[int64]map[*socket]struct{}
}

// ByID reads one identity, or one console session, by its id (nil when there is none).
type ByID interface {
	IdentityByID(ctx context.Context, id int64) (*Identity, error)
	ConsoleSessionByID(ctx context.Context, id int64) (*ConsoleSession, error)
}

// socket is one watched websocket's connection context.
type socket struct {
	name    string
	console int64 // the console session it authenticated with; 0 for a bearer token
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	live    *Live // the identity its operations are authorised as
}

// NewSocketRegistry returns an empty watch.
func NewSocketRegistry(store ByID, log *slog.Logger) *SocketRegistry {
	return &SocketRegistry{store: store, log: log, open: map[int64]map[*socket]struct{}{}, console: map[int64]map[*socket]struct{}{}}
}

// ErrConsoleSessionEnded is why a console session no longer authenticates once it was
// ended (signed out) or its identity was deleted.
func ErrConsoleSessionEnded() error {
	return apperr.New(apperr.Unauthenticated, "your console session has ended (signed out, or its identity was removed): sign in again")
}

// Watch returns a context derived from parent that ends when id is revoked, deleted or
// expires, and carries the identity as it is now (identity.Live: FromContext answers it),
// replaced whenever the identity changes on any replica (its permissions, its groups
// confirmed again by the identity provider), so the socket's next operation is
// authorised as the identity is then. It reads the identity once more after registering,
// so a change committed since it authenticated is not missed; if that read refuses, so
// does Watch.
func (s *SocketRegistry) Watch(parent context.Context, id *Identity) (context.Context, error) {
	return s.watch(parent, id, 0)
}

// WatchConsoleSession is Watch for a socket authenticated by the console session with
// id console: its context also ends when that session ends. Like Watch it reads the session
// once more after registering, so a sign-out committed meanwhile is not missed.
func (s *SocketRegistry) WatchConsoleSession(parent context.Context, id *Identity, console int64) (context.Context, error) {
	return s.watch(parent, id, console)
}

func (s *SocketRegistry) watch(parent context.Context, id *Identity, console int64) (context.Context, error) {
	ctx, cancel := context.WithCancelCause(parent)
	ss := &socket{name: id.Name, console: console, cancel: cancel, live: NewLive(id)}
	ctx = WithLive(ctx, ss.live)
	s.mu.Lock()
	add(s.open, id.ID, ss)
	if console != 0 {
		add(s.console, console, ss)
	}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() { s.forget(id.ID, ss) })

	fresh, err := s.store.IdentityByID(ctx, id.ID)
	if err == nil {
		err = verdict(id.Name, fresh, time.Now())
	}
	if err == nil && console != 0 {
		err = s.consoleSessionVerdict(ctx, console)
	}
	if err != nil {
		cancel(err)
		return nil, err
	}
	s.mu.Lock()
	ss.live.Set(fresh)
	s.schedule(ss, fresh)
	s.mu.Unlock()
	return ctx, nil
}

// Changed re-reads an identity that was revoked, deleted, given another expiry or other
// permissions, or whose groups the identity provider confirmed again (on any replica):
// it ends its sockets here when it may no longer authenticate, and otherwise gives them
// the identity as it is now.
func (s *SocketRegistry) Changed(ctx context.Context, id int64) {
	s.mu.Lock()
	var name string
	for ss := range s.open[id] {
		name = ss.name
	}
	n := len(s.open[id])
	s.mu.Unlock()
	if n == 0 {
		return
	}
	fresh, err := s.store.IdentityByID(ctx, id)
	if err != nil {
		// Not known to be revoked: keep the sockets. A lost database connection also
		// makes the listener reconnect, and CheckAll comes next.
		s.log.WarnContext(ctx, "could not re-read a changed identity; its websockets stay open until it can be", "identity_id", id, "error", err)
		return
	}
	verdictErr := verdict(name, fresh, time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss := range s.open[id] {
		if verdictErr != nil {
			ss.cancel(verdictErr)
		} else if err := narrowed(name, ss.live.p.Load(), fresh); err != nil {
			// Subscriptions started under the wider scope (a shared stream, one that
			// answers every cluster) would go on answering it: the client reconnects.
			ss.cancel(err)
		} else {
			ss.live.Set(fresh)
			s.schedule(ss, fresh)
		}
	}
	if verdictErr != nil {
		s.log.InfoContext(ctx, "closed the websockets of an identity that can no longer authenticate", "identity", name, "identity_id", id, "sockets", n, "reason", apperr.PublicMessage(verdictErr))
	}
}

// ConsoleSessionEnded ends the sockets of a console session that was ended (signed out,
// on any replica).
func (s *SocketRegistry) ConsoleSessionEnded(ctx context.Context, console int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.console[console])
	for ss := range s.console[console] {
		ss.cancel(ErrConsoleSessionEnded())
	}
	if n > 0 {
		s.log.InfoContext(ctx, "closed the websockets of a console session that ended", "session", console, "sockets", n)
	}
}

// CheckAll re-reads every identity and console session with open connections, after
// notifications may have been lost.
func (s *SocketRegistry) CheckAll(ctx context.Context) {
	s.mu.Lock()
	ids := make([]int64, 0, len(s.open))
	for id := range s.open {
		ids = append(ids, id)
	}
	consoles := make([]int64, 0, len(s.console))
	for id := range s.console {
		consoles = append(consoles, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.Changed(ctx, id)
	}
	for _, id := range consoles {
		if err := s.consoleSessionVerdict(ctx, id); apperr.CodeOf(err) == apperr.Unauthenticated {
			s.ConsoleSessionEnded(ctx, id)
		}
	}
}

// consoleSessionVerdict is why the console session's connections must end (it is gone), nil
// when they may go on, or the read's error (which ends nothing in CheckAll).
func (s *SocketRegistry) consoleSessionVerdict(ctx context.Context, console int64) error {
	sess, err := s.store.ConsoleSessionByID(ctx, console)
	if err != nil {
		return err
	}
	if sess == nil {
		return ErrConsoleSessionEnded()
	}
	return nil
}

// Open returns how many sockets are watched (for tests and metrics).
func (s *SocketRegistry) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, set := range s.open {
		n += len(set)
	}
	return n
}

// schedule (re)sets the socket's expiry timer to the identity's expiry. s.mu is held.
func (s *SocketRegistry) schedule(ss *socket, id *Identity) {
	if ss.timer != nil {
		ss.timer.Stop()
		ss.timer = nil
	}
	if id.ExpiresAt == nil {
		return
	}
	end := id.Usable(*id.ExpiresAt)
	ss.timer = time.AfterFunc(time.Until(*id.ExpiresAt), func() { ss.cancel(end) })
}

func (s *SocketRegistry) forget(id int64, ss *socket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss.timer != nil {
		ss.timer.Stop()
	}
	remove(s.open, id, ss)
	if ss.console != 0 {
		remove(s.console, ss.console, ss)
	}
}

func add(m map[int64]map[*socket]struct{}, k int64, ss *socket) {
	if m[k] == nil {
		m[k] = map[*socket]struct{}{}
	}
	m[k][ss] = struct{}{}
}

func remove(m map[int64]map[*socket]struct{}, k int64, ss *socket) {
	delete(m[k], ss)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

// verdict is why a socket of the identity named name must end, given the identity as
// it is now (nil: deleted), or nil when it may go on: a socket's subscriptions were
// authorised when they started, so one whose identity may no longer read is closed.
func verdict(name string, now *Identity, at time.Time) error {
	if now == nil {
		return apperr.New(apperr.Unauthenticated, "identity %q no longer exists: ask an administrator for a new identity", name)
	}
	if err := now.Usable(at); err != nil {
		return err
	}
	if !now.ReadScope().Any() {
		return apperr.New(apperr.Forbidden, "identity %q no longer has the %s permission: ask an administrator to grant it", name, ViewInfrastructure)
	}
	return nil
}

// narrowed is why a socket authorised as was must end now that its identity reads less
// (ReadScope: every cluster before and some now, or other clusters), or nil.
func narrowed(name string, was, now *Identity) error {
	before, after := was.ReadScope(), now.ReadScope()
	if after.All() || before.Equal(after) {
		return nil
	}
	return apperr.New(apperr.Forbidden, "identity %q now reads fewer clusters than when this connection started: connect again", name)
}
