// Package localpg runs a private PostgreSQL from the system's own binaries (Debian's
// postgresql package) in a state folder: the embedded default a newcomer gets when no
// APELORA_DATABASE_URL is set. It listens on a unix socket in that folder only.
//
// PostgreSQL refuses to run as root, so when Apelora runs as root the server runs as the
// `postgres` system user, which owns the data folder.
package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is a local PostgreSQL in a state folder.
type Server struct {
	Dir     string // state folder: data/, the socket and the log live below it
	BinDir  string // folder with initdb, pg_ctl and postgres
	started bool   // this process started it, so Stop stops it
	cred    *syscall.Credential
}

// DataDir is where the cluster's files are.
func (s *Server) DataDir() string { return filepath.Join(s.Dir, "data") }

// SocketDir is where the server's unix socket is.
func (s *Server) SocketDir() string { return filepath.Join(s.Dir, "run") }

// LogFile is the server's log.
func (s *Server) LogFile() string { return filepath.Join(s.Dir, "postgresql.log") }

// URL is the connection string for database db.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("host=%s port=5432 user=postgres dbname=%s sslmode=disable", s.SocketDir(), db)
}

// FindBinDir returns the newest /usr/lib/postgresql/N/bin that has pg_ctl, or the folder
// named by APELORA_POSTGRES_BIN.
func FindBinDir() (string, error) {
	if d := os.Getenv("APELORA_POSTGRES_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err != nil {
			return "", fmt.Errorf("APELORA_POSTGRES_BIN=%s has no pg_ctl: point it at PostgreSQL's bin folder", d)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	if len(dirs) == 0 {
		return "", errors.New("no PostgreSQL server binaries found in /usr/lib/postgresql: install them (apt-get install postgresql) or set APELORA_DATABASE_URL")
	}
	return filepath.Dir(dirs[0]), nil
}

func versionOf(pgCtl string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(pgCtl))))
	return v
}

// New prepares a server in dir (created if missing). It starts nothing.
func New(dir string) (*Server, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: abs, BinDir: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("running as root, but there is no `postgres` system user to run PostgreSQL as (PostgreSQL refuses root): install Debian's postgresql package, or set APELORA_DATABASE_URL")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return s, nil
}

// Start initialises the cluster if needed and starts the server unless it is already
// running (for example started by `apelora serve` while `apelora identity create` runs).
// It creates database db if it does not exist.
func (s *Server) Start(ctx context.Context, db string) error {
	if err := s.prepareDirs(); err != nil {
		return err
	}
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(s.DataDir(), "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if out, err := s.run(ctx, "initdb", "-D", s.DataDir(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"); err != nil {
			return fmt.Errorf("initdb in %s: %w\n%s", s.DataDir(), err, out)
		}
	}
	if !s.running(ctx) {
		opts := fmt.Sprintf("-k %s -c listen_addresses='' -p 5432", s.SocketDir())
		if out, err := s.run(ctx, "pg_ctl", "-D", s.DataDir(), "-l", s.LogFile(), "-w", "-t", "60", "-o", opts, "start"); err != nil {
			return fmt.Errorf("start PostgreSQL in %s: %w\n%s(see %s)", s.DataDir(), err, out, s.LogFile())
		}
		s.started = true
	}
	return s.createDatabase(ctx, db)
}

// Started reports whether this process started the server (and so should stop it).
func (s *Server) Started() bool { return s.started }

// Stop stops the server if this process started it.
func (s *Server) Stop(ctx context.Context) error {
	if !s.started {
		return nil
	}
	if out, err := s.run(ctx, "pg_ctl", "-D", s.DataDir(), "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("stop PostgreSQL in %s: %w\n%s", s.DataDir(), err, out)
	}
	s.started = false
	return nil
}

func (s *Server) running(ctx context.Context) bool {
	_, err := s.run(ctx, "pg_ctl", "-D", s.DataDir(), "status")
	return err == nil
}

func (s *Server) createDatabase(ctx context.Context, db string) error {
	out, err := s.run(ctx, "psql", "-h", s.SocketDir(), "-p", "5432", "-U", "postgres", "-d", "postgres", "-tAc",
		fmt.Sprintf("SELECT 1 FROM pg_database WHERE datname = '%s'", db))
	if err != nil {
		return fmt.Errorf("look for database %s: %w\n%s", db, err, out)
	}
	if strings.TrimSpace(string(out)) == "1" {
		return nil
	}
	if out, err := s.run(ctx, "createdb", "-h", s.SocketDir(), "-p", "5432", "-U", "postgres", db); err != nil {
		return fmt.Errorf("create database %s: %w\n%s", db, err, out)
	}
	return nil
}

// prepareDirs creates the state folder so the server's user can use it, and checks that
// user can reach it at all (a state folder under /root cannot work for `postgres`).
func (s *Server) prepareDirs() error {
	// The state folder itself must stay reachable by the server's user.
	if err := os.MkdirAll(filepath.Dir(s.Dir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(s.Dir), err)
	}
	for _, d := range []string{s.Dir, s.SocketDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if s.cred == nil {
		return nil
	}
	for _, d := range []string{s.Dir, s.SocketDir()} {
		if err := os.Chown(d, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("hand %s to the postgres user: %w", d, err)
		}
	}
	for p := filepath.Dir(s.Dir); p != "/"; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("the postgres user cannot reach %s because %s is not searchable by others (mode %v): choose an APELORA_STATE_DIR outside it (the default is /var/lib/apelora)", s.Dir, p, fi.Mode().Perm())
		}
	}
	return nil
}

// lock serialises starts of the same state folder by several processes.
func (s *Server) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.Dir, "postgres.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	bin := filepath.Join(s.BinDir, name)
	if _, err := os.Stat(bin); err != nil {
		if p, lerr := exec.LookPath(name); lerr == nil {
			bin = p
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		cmd.Env = append(cmd.Env, "HOME="+s.Dir)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}
