package postgres

import (
	"context"
	"io/fs"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/apelora/fabric/migrations"
)

// Observer is told of every statement the store runs and of every attempt to write an
// audit event (metrics). Its methods must be quick and safe for concurrent use.
type Observer interface {
	// Statement: one statement, named by StatementName (never its text or arguments).
	Statement(name string, took time.Duration, err error)
	// AuditWrite: one attempt to write an audit event; err is why it was not written.
	AuditWrite(err error)
}

// Observe makes o the store's observer (nil: none). Statements on every connection of the
// store count, those of the listener and the leader leases included.
func (s *Store) Observe(o Observer) {
	if o == nil {
		s.tracer.obs.Store(nil)
		return
	}
	s.tracer.obs.Store(&o)
}

// auditWrite tells the observer how an attempt to write an audit event ended.
func (s *Store) auditWrite(err error) {
	if o := s.tracer.obs.Load(); o != nil {
		(*o).AuditWrite(err)
	}
}

// tracer is the pgx QueryTracer every connection of the store carries; it passes each
// statement to the observer, if any, and each COMMIT and ROLLBACK to the audit log's
// witness (auditCommits), which waits for an append's transaction to end.
type tracer struct {
	obs     atomic.Pointer[Observer]
	commits atomic.Pointer[auditCommits]
}

type traceKey struct{}

type traced struct {
	name  string
	start time.Time
}

// txEndKey marks a statement that ends a transaction ("commit" or "rollback", as pgx
// sends them) for TraceQueryEnd.
type txEndKey struct{}

func (t *tracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if (data.SQL == "commit" || data.SQL == "rollback") && t.commits.Load() != nil {
		ctx = context.WithValue(ctx, txEndKey{}, data.SQL)
	}
	if t.obs.Load() == nil {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, traced{name: StatementName(data.SQL), start: time.Now()})
}

func (t *tracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if c := t.commits.Load(); c != nil {
		if sql, ok := ctx.Value(txEndKey{}).(string); ok {
			c.ended(conn, sql, data.CommandTag, data.Err)
		}
	}
	o := t.obs.Load()
	q, ok := ctx.Value(traceKey{}).(traced)
	if o == nil || !ok {
		return
	}
	(*o).Statement(q.name, time.Since(q.start), data.Err)
}

// writes finds a statement that changes rows (also inside a WITH): writeTx's writes.
var writes = regexp.MustCompile(`(?i)\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+([a-z_][a-z0-9_]*)`)

var (
	word       = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	pgFunction = regexp.MustCompile(`^pg_[a-z_]{1,40}$`)
	comments   = regexp.MustCompile(`(?s)--[^\n]*|/\*.*?\*/`)
	quoted     = regexp.MustCompile(`'(?:[^']|'')*'`)
)

// verbs are the statements named by their first word; any other is "other".
var verbs = map[string]bool{
	"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "WITH": true, "BEGIN": true, "COMMIT": true,
	"ROLLBACK": true, "SAVEPOINT": true, "RELEASE": true, "LISTEN": true, "UNLISTEN": true, "NOTIFY": true,
	"SET": true, "SHOW": true, "LOCK": true, "CREATE": true, "ALTER": true, "DROP": true, "DO": true, "TRUNCATE": true,
}

var (
	tablesOnce sync.Once
	tableSet   map[string]bool
)

// tables are the tables the migrations create (and the migrations' own): the only table
// names a statement's name may carry.
func tables() map[string]bool {
	tablesOnce.Do(func() {
		tableSet = map[string]bool{"schema_migrations": true}
		create := regexp.MustCompile(`(?i)CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)
		_ = fs.WalkDir(migrations.Files, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(migrations.Files, p)
			if err != nil {
				return err
			}
			for _, m := range create.FindAllStringSubmatch(string(b), -1) {
				tableSet[strings.ToLower(m[1])] = true
			}
			return nil
		})
	})
	return tableSet
}

// StatementName names a statement for metrics by its verb and the first table of the
// schema it names ("INSERT audit_events", "SELECT machine_records"), or for a statement
// without one its first PostgreSQL function ("SELECT pg_try_advisory_lock"), or just its
// verb. The names come from a fixed vocabulary, never from the statement's values: the
// set is bounded by the schema.
func StatementName(sql string) string {
	text := quoted.ReplaceAllString(comments.ReplaceAllString(sql, " "), "''")
	words := word.FindAllString(text, -1)
	if len(words) == 0 {
		return "ping" // pgx pings with a comment alone
	}
	verb := strings.ToUpper(words[0])
	if !verbs[verb] {
		return "other"
	}
	known := tables()
	for _, w := range words[1:] {
		if l := strings.ToLower(w); known[l] {
			return verb + " " + l
		}
	}
	for _, w := range words[1:] {
		if l := strings.ToLower(w); pgFunction.MatchString(l) {
			return verb + " " + l
		}
	}
	return verb
}
