package oidc

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/apelora/fabric/domain/identity"
)

// TokenKey seals the identity provider's refresh tokens kept with their sessions
// (identity.TokenSealer): AES-256-GCM under a key that lives in a file, never in the
// database, bound to the console session's id, so a database superuser reads only
// ciphertext, and a sealed token copied to another session's row does not open.
type TokenKey struct {
	aead cipher.AEAD
	id   []byte
}

var _ identity.TokenSealer = (*TokenKey)(nil)

// TokenKeyFile is the key's file name in the state folder (APELORA_OIDC_TOKEN_KEY_FILE
// names another).
const TokenKeyFile = "oidc-token.key"

// NewTokenKey returns the sealer of a 32-byte key.
func NewTokenKey(key []byte) (*TokenKey, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("the key is %d bytes, not 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(append([]byte("apelora oidc token key id\x00"), key...))
	return &TokenKey{aead: aead, id: h[:8]}, nil
}

// NewRandomTokenKey returns a sealer of a fresh key that lives as long as the process.
func NewRandomTokenKey() (*TokenKey, error) {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, err
	}
	return NewTokenKey(key[:])
}

// LoadOrCreateTokenKey reads the key file at path (base64 of 32 random bytes, readable by
// its owner alone), or makes it (mode 0600) when there is none; made says it did.
func LoadOrCreateTokenKey(path string) (k *TokenKey, made bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		var key [32]byte
		if _, err := rand.Read(key[:]); err != nil {
			return nil, false, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, false, fmt.Errorf("make the folder of the identity provider's token key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, false, fmt.Errorf("make the identity provider's token key %s: %w", path, err)
		}
		_, werr := f.WriteString(base64.StdEncoding.EncodeToString(key[:]) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, false, fmt.Errorf("write the identity provider's token key %s: %w", path, werr)
		}
		k, err := NewTokenKey(key[:])
		return k, true, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the identity provider's token key: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, false, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("the identity provider's token key %s is readable by others (mode %04o): chmod 600 it", path, fi.Mode().Perm())
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err == nil && len(key) != 32 {
		err = fmt.Errorf("%d bytes, not 32", len(key))
	}
	if err != nil {
		// Never quote the file: it is the secret.
		return nil, false, fmt.Errorf("the identity provider's token key %s is not the base64 of 32 bytes (%v): move it aside to have a new one made (SSO sessions then sign in again)", path, err)
	}
	k, err = NewTokenKey(key)
	return k, false, err
}

// KeyID is 8 bytes of the key's SHA-256 (with a label): it names the key, and tells
// nothing of it.
func (k *TokenKey) KeyID() []byte { return k.id }

// aad binds a sealed token to its session.
func aad(consoleSession int64) []byte {
	b := []byte("apelora oidc refresh token\x00console session ")
	return binary.BigEndian.AppendUint64(b, uint64(consoleSession))
}

// Seal returns nonce ‖ ciphertext of t, for consoleSession.
func (k *TokenKey) Seal(t identity.ProviderToken, consoleSession int64) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(t.Reveal())+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return k.aead.Seal(nonce, nonce, []byte(t.Reveal()), aad(consoleSession)), nil
}

// Open returns the token sealed for consoleSession.
func (k *TokenKey) Open(sealed []byte, consoleSession int64) (identity.ProviderToken, error) {
	if len(sealed) < k.aead.NonceSize()+k.aead.Overhead() {
		return identity.ProviderToken{}, errors.New("the sealed token is too short")
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, sealed[:n], sealed[n:], aad(consoleSession))
	if err != nil {
		return identity.ProviderToken{}, errors.New("the sealed token does not open with this key for this session (changed, moved, or sealed with another key)")
	}
	return identity.NewProviderToken(string(plain)), nil
}
