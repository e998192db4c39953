package auditlog

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"
)

// KeyName is the name checkpoints are signed under.
const KeyName = "apelora-audit"

// KeyFile is the signing key's file name in APELORA_STATE_DIR.
const KeyFile = "audit-signing.key"

// Key signs checkpoints and checks them, and seals every event as it is appended (its
// Sealer, derived from the same secret). It never leaves the process: not in a table, a
// log line, an error or the API; only its verifier key (public) is shown.
type Key struct {
	Signer   note.Signer
	Verifier note.Verifier
	// VerifierKey is the public key in note's text form (name+hash+key), for anyone who
	// checks checkpoints elsewhere.
	VerifierKey string
	// Sealer seals tree heads with a key derived from the signing key's seed.
	Sealer *Sealer
}

// LoadKey reads the signing key file at path.
func LoadKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the audit signing key: %w", err)
	}
	k, err := parseKey(strings.TrimSpace(string(b)))
	if err != nil {
		// Never quote the file: it is the secret.
		return nil, fmt.Errorf("the audit signing key %s is not a note signing key (PRIVATE+KEY+…): %v; move it aside to have a new one made, or restore it from backup", path, err)
	}
	return k, nil
}

// LoadOrCreateKey reads the signing key at path, making one (mode 0600, its folder 0700)
// when there is none: what `apelora serve` does on its first start.
func LoadOrCreateKey(path string) (*Key, bool, error) {
	k, err := LoadKey(path)
	if err == nil {
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("make the folder for the audit signing key: %w", err)
	}
	skey, _, err := note.GenerateKey(rand.Reader, KeyName)
	if err != nil {
		return nil, false, fmt.Errorf("make an audit signing key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another process made it first: use theirs.
		k, err := LoadKey(path)
		return k, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("write the audit signing key: %w", err)
	}
	if _, err := f.WriteString(skey + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return nil, false, fmt.Errorf("write the audit signing key: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, false, fmt.Errorf("write the audit signing key: %w", err)
	}
	k, err = parseKey(skey)
	return k, err == nil, err
}

// parseKey reads note's signing key text, PRIVATE+KEY+name+hash+base64(alg, seed), and
// derives its verifier.
func parseKey(skey string) (*Key, error) {
	signer, err := note.NewSigner(skey)
	if err != nil {
		return nil, errors.New("malformed")
	}
	// PRIVATE, KEY, name, hash, then the key (whose base64 may hold '+').
	parts := strings.SplitN(skey, "+", 5)
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return nil, errors.New("not an Ed25519 key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(signer.Name(), pub)
	if err != nil {
		return nil, err
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	return &Key{Signer: signer, Verifier: v, VerifierKey: vkey, Sealer: newSealer(raw[1:])}, nil
}

// ParseVerifierKey reads a verifier key (name+hash+base64), as `apelora audit verify
// --verifier-key` takes it.
func ParseVerifierKey(vkey string) (note.Verifier, error) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return nil, fmt.Errorf("the verifier key is not a note verifier key (%s+hash+base64): %w", KeyName, err)
	}
	return v, nil
}

// ephemeral is the key of a process that has no key file (EphemeralKey).
var ephemeral = sync.OnceValues(func() (*Key, error) {
	skey, _, err := note.GenerateKey(rand.Reader, KeyName)
	if err != nil {
		return nil, fmt.Errorf("make an audit signing key: %w", err)
	}
	return parseKey(skey)
})

// EphemeralKey is one key per process, made on first use and never written anywhere: what a
// Config built in code with no state folder signs and seals with (tests, benchmarks). Every
// store and service of the process that has no key file uses the same one, so replicas
// started in one test process agree.
func EphemeralKey() (*Key, error) { return ephemeral() }

// KeyFromText reads a signing key in note's text form (PRIVATE+KEY+…).
func KeyFromText(skey string) (*Key, error) {
	k, err := parseKey(strings.TrimSpace(skey))
	if err != nil {
		return nil, fmt.Errorf("not a note signing key (PRIVATE+KEY+…): %v", err)
	}
	return k, nil
}
