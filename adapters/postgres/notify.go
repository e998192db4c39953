package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/domain/plan"
)

// Notification is a NOTIFY received on a channel. Resync means the listening connection
// was lost and re-established, so notifications may have been missed in between:
// streams that can, catch up from the database.
type Notification struct {
	Channel string
	Payload string
	Resync  bool
}

// Listener holds one connection that LISTENs on a fixed set of channels and fans every
// notification out to in-process subscribers. One per process is enough, however many
// subscribers there are: this is what lets several API replicas serve the same
// subscriptions.
type Listener struct {
	s        *Store
	channels []string
	topics   map[string]*fanout[Notification]
	ready    chan struct{}
}

// NewListener returns a listener for the given channels. Call Run to start it.
func (s *Store) NewListener(channels ...string) *Listener {
	l := &Listener{s: s, channels: channels, topics: map[string]*fanout[Notification]{}, ready: make(chan struct{})}
	for _, c := range channels {
		l.topics[c] = &fanout[Notification]{}
	}
	return l
}

// Subscribe streams the notifications of one channel (which must be one the listener was
// made for). Close the subscription when done.
func (l *Listener) Subscribe(channel string, buffer int) *fanoutSub[Notification] {
	t, ok := l.topics[channel]
	if !ok {
		panic("postgres: no listener for channel " + channel)
	}
	return t.Subscribe(buffer)
}

// Ready is closed once the listener has LISTENed for the first time.
func (l *Listener) Ready() <-chan struct{} { return l.ready }

// Run listens until ctx ends, reconnecting with backoff when the connection is lost.
func (l *Listener) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := l.listen(ctx, func() {
			if first {
				close(l.ready)
				first = false
			} else {
				for c, t := range l.topics {
					t.Publish(Notification{Channel: c, Resync: true})
				}
			}
			backoff = 100 * time.Millisecond
		})
		if ctx.Err() != nil {
			return
		}
		l.s.log.Warn("database notifications interrupted; reconnecting", "error", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (l *Listener) listen(ctx context.Context, listening func()) error {
	conn, err := l.s.sessionConn(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, c := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c}.Sanitize()); err != nil {
			return err
		}
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if t, ok := l.topics[n.Channel]; ok {
			t.Publish(Notification{Channel: n.Channel, Payload: n.Payload})
		}
	}
}

// Notify sends payload on channel at once, outside any transaction (also from inside a
// change: it uses connections of its own). It is a write (plan.Writes): a dry run's
// NOTIFY is a call of the plan, sent to nobody.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	_, err := s.writes.Do(ctx, plan.Database, func() plan.Call {
		return plan.Call{Request: "NOTIFY " + channel, Target: actionMachine(ctx)}
	}, func() error {
		_, err := s.notify.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
		return dbError(err)
	})
	return err
}
