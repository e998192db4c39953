package oidc

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
)

// A sealed refresh token opens only with its key, for its session, unchanged; the
// database holds no byte of it in clear.
func TestTokenKeySealsForOneSession(t *testing.T) {
	k, err := NewRandomTokenKey()
	if err != nil {
		t.Fatal(err)
	}
	tok := identity.NewProviderToken("refresh-0b1f4c2e-secret")
	sealed, err := k.Seal(tok, 41)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("secret")) || bytes.Contains(sealed, []byte(tok.Reveal())) {
		t.Fatal("the sealed token holds it in clear")
	}
	if got, err := k.Open(sealed, 41); err != nil || got.Reveal() != tok.Reveal() {
		t.Fatalf("open: %v", err)
	}
	again, _ := k.Seal(tok, 41)
	if bytes.Equal(again, sealed) {
		t.Fatal("two seals of one token are the same bytes (no fresh nonce)")
	}
	other, _ := NewRandomTokenKey()
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	for name, open := range map[string]func() error{
		"moved to another session": func() error { _, err := k.Open(sealed, 42); return err },
		"another key":              func() error { _, err := other.Open(sealed, 41); return err },
		"changed":                  func() error { _, err := k.Open(tampered, 41); return err },
		"cut short":                func() error { _, err := k.Open(sealed[:20], 41); return err },
	} {
		if err := open(); err == nil {
			t.Errorf("%s: opened", name)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error quotes the token: %v", name, err)
		}
	}
	if bytes.Equal(k.KeyID(), other.KeyID()) || len(k.KeyID()) != 8 {
		t.Fatalf("key ids %x %x", k.KeyID(), other.KeyID())
	}
}

// The key file is made once, owner-only, and read back as the same key; one readable by
// others, or not a key, is refused without quoting it.
func TestTokenKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", TokenKeyFile)
	k, made, err := LoadOrCreateTokenKey(path)
	if err != nil || !made {
		t.Fatalf("first start: made %v, %v", made, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi.Mode(), err)
	}
	again, made, err := LoadOrCreateTokenKey(path)
	if err != nil || made || !bytes.Equal(again.KeyID(), k.KeyID()) {
		t.Fatalf("second start: made %v, %v, same key %v", made, err, bytes.Equal(again.KeyID(), k.KeyID()))
	}
	sealed, _ := k.Seal(identity.NewProviderToken("t"), 1)
	if _, err := again.Open(sealed, 1); err != nil {
		t.Fatalf("a token sealed before a restart does not open after it: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateTokenKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key readable by others: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("not-a-key-SECRETISH\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateTokenKey(bad); err == nil || strings.Contains(err.Error(), "SECRETISH") {
		t.Fatalf("a file that is no key: %v", err)
	}
}
