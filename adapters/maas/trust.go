package maas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"
)

// trust is the transport to MAAS. With a CA file it is rebuilt whenever the file changes,
// so a rotated MAAS certificate is trusted without a restart: every request compares the
// file's size and modification time with those it was read at (one stat), and a refused
// certificate makes the client re-read the file whatever they say (reload).
//
// A file that cannot be read or holds no certificate keeps the transport as it was (the
// old certificates stay trusted) and is logged once per version of the file.
type trust struct {
	file  string
	build func(*tls.Config) *http.Transport
	log   *slog.Logger

	mu     sync.Mutex
	cur    *http.Transport
	stamp  fileStamp         // of the file cur's pool was read from
	sum    [sha256.Size]byte // of its contents
	failed fileStamp         // the last version that could not be loaded, logged once
}

// fileStamp is what a stat says about a version of the CA file.
type fileStamp struct {
	size    int64
	modTime time.Time
}

func stampOf(fi os.FileInfo) fileStamp { return fileStamp{fi.Size(), fi.ModTime()} }

// newTrust reads the CA file (when set) and builds the first transport. A bad file is a
// configuration error here: at start nothing else could be trusted.
func newTrust(file string, build func(*tls.Config) *http.Transport, log *slog.Logger) (*trust, error) {
	t := &trust{file: file, build: build, log: log}
	if file == "" {
		t.cur = build(tlsConfig(nil)) // nil RootCAs: the system trust store
		return t, nil
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("%w: read MAAS CA file: %v; check the path and its permissions", ErrInvalidConfig, err)
	}
	pool, sum, err := readPool(file)
	if err != nil {
		return nil, err
	}
	t.cur, t.stamp, t.sum = build(tlsConfig(pool)), stampOf(fi), sum
	return t, nil
}

// readPool reads the PEM certificates of a CA file.
func readPool(file string) (*x509.CertPool, [sha256.Size]byte, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, [sha256.Size]byte{}, fmt.Errorf("%w: read MAAS CA file: %v; check the path and its permissions", ErrInvalidConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, [sha256.Size]byte{}, fmt.Errorf("%w: MAAS CA file %q holds no PEM certificate; it must contain the CA (or MAAS leaf) certificate in PEM form", ErrInvalidConfig, file)
	}
	return pool, sha256.Sum256(bytes.TrimSpace(pem)), nil
}

func (t *trust) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.transport(req.Context()).RoundTrip(req)
}

// transport returns the transport for the CA file as it is now.
func (t *trust) transport(ctx context.Context) *http.Transport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file != "" {
		if fi, err := os.Stat(t.file); err == nil && stampOf(fi) != t.stamp && stampOf(fi) != t.failed {
			t.loadLocked(ctx, stampOf(fi))
		}
	}
	return t.cur
}

// reload re-reads the CA file whatever its stamp says and reports whether the trusted
// certificates changed (then a refused connection is worth one more try).
func (t *trust) reload(ctx context.Context) bool {
	if t.file == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fi, err := os.Stat(t.file)
	if err != nil {
		t.logFailure(ctx, err)
		return false
	}
	return t.loadLocked(ctx, stampOf(fi))
}

// loadLocked reads the file; when its certificates differ from the trusted ones it builds
// a new transport and closes the old one's idle connections (made under the old trust).
func (t *trust) loadLocked(ctx context.Context, st fileStamp) bool {
	pool, sum, err := readPool(t.file)
	if err != nil {
		if st != t.failed {
			t.failed = st
			t.logFailure(ctx, err)
		}
		return false
	}
	t.stamp, t.failed = st, fileStamp{}
	if sum == t.sum {
		return false // touched, not changed
	}
	old := t.cur
	t.cur, t.sum = t.build(tlsConfig(pool)), sum
	old.CloseIdleConnections()
	t.log.LogAttrs(ctx, slog.LevelInfo, "MAAS CA file changed: trusting its certificates from now on", slog.String("ca_file", t.file))
	return true
}

func (t *trust) logFailure(ctx context.Context, err error) {
	t.log.LogAttrs(ctx, slog.LevelWarn, "MAAS CA file could not be re-read; still trusting the certificates read before",
		slog.String("ca_file", t.file), slog.String("error", err.Error()))
}

// UntrustedCertificate reports whether err is MAAS's certificate failing verification
// against the trusted certificates (the CA file, or the system trust store): MAAS's
// certificate changed, or the CA file is wrong. A certificate marked as a CA is not this
// (see ErrCACertificateServed).
func UntrustedCertificate(err error) bool { return refusedCertificate(err) }

// refusedCertificate reports whether err is MAAS's certificate failing verification, which
// a changed CA file may cure (a certificate marked as a CA never is).
func refusedCertificate(err error) bool {
	if errors.Is(err, ErrCACertificateServed) {
		return false
	}
	var (
		verr        *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
	)
	return errors.As(err, &verr) || errors.As(err, &unknownAuth)
}
