package app

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/apelora/fabric/adapters/oidc"
	"github.com/apelora/fabric/adapters/postgres"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/server"
)

// Single sign-on's settings, in one place: read here, shown by `apelora env`.
const (
	EnvOIDCIssuer           = "APELORA_OIDC_ISSUER"
	EnvOIDCClientID         = "APELORA_OIDC_CLIENT_ID"
	EnvOIDCClientSecretFile = "APELORA_OIDC_CLIENT_SECRET_FILE"
	EnvOIDCScopes           = "APELORA_OIDC_SCOPES"
	EnvOIDCGroupsClaim      = "APELORA_OIDC_GROUPS_CLAIM"
	EnvOIDCGroupPermissions = "APELORA_OIDC_GROUP_PERMISSIONS"
	EnvOIDCRecheckInterval  = "APELORA_OIDC_RECHECK_INTERVAL"
	EnvOIDCTokenKeyFile     = "APELORA_OIDC_TOKEN_KEY_FILE"
	defaultOIDCScopes       = "openid profile email groups offline_access"
	defaultOIDCGroupsClaim  = "groups"
	minOIDCRecheckInterval  = 10 * time.Second
	maxOIDCRecheckInterval  = time.Hour
)

// SSOConfig is single sign-on through the company's identity provider; Issuer "" when
// not configured.
type SSOConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string // read once from the root-only file; never logged or shown
	Scopes       []string
	GroupsClaim  string
	Groups       identity.GroupPermissions
	// Recheck is how long the provider's word on a user's groups holds
	// (APELORA_OIDC_RECHECK_INTERVAL; zero: identity.DefaultSSORecheckInterval).
	Recheck time.Duration
	// TokenKeyFile is APELORA_OIDC_TOKEN_KEY_FILE ("": the state folder's); see
	// TokenKeyPath.
	TokenKeyFile string
}

// SSOVariables documents single sign-on's variables.
func SSOVariables() []Variable {
	return []Variable{
		{EnvOIDCIssuer, "(none: no single sign-on)", "OpenID Connect issuer URL (with discovery, e.g. https://login.example.com/realms/ops; https, plain http only to loopback); the console then offers Sign in with SSO, and the provider must allow the redirect URI APELORA_PUBLIC_URL" + server.SSOCallbackPath},
		{EnvOIDCClientID, "(none)", "Apelora's client ID at the issuer; ID tokens must name it as their audience"},
		{EnvOIDCClientSecretFile, "(none: a public client, PKCE alone)", "file holding the client secret, readable by its owner only (root or the server's user; mode 0600 or 0400), read once at start, never logged"},
		{EnvOIDCScopes, defaultOIDCScopes, "space-separated scopes asked for (openid is always asked); offline_access asks for the refresh token the re-checks need (some providers, such as Entra ID and Okta, give none without it)"},
		{EnvOIDCGroupsClaim, defaultOIDCGroupsClaim, "the ID token claim that lists the user's groups"},
		{EnvOIDCGroupPermissions, "(none)", "group=permission[,permission];… mapping the provider's groups to view-infrastructure, manage-infrastructure and hardware.delete, e.g. apelora-admins=manage-infrastructure,hardware.delete;apelora-viewers=view-infrastructure: the only source of an SSO user's permissions; a user in no mapped group is refused. permission@cluster grants manage-infrastructure or hardware.delete in that cluster only (rack1-ops=manage-infrastructure@rack1); a grant naming a cluster not registered is skipped with a warning"},
		{EnvOIDCRecheckInterval, durationText(identity.DefaultSSORecheckInterval), "how long the provider's word on a signed-in user's groups holds (10s to 1h): each session's groups are asked for again (with its refresh token) once half of it has passed, so a demotion at the provider takes effect within half of it; a provider that cannot be asked leaves the last known groups for at most all of it, then view-only"},
		{EnvOIDCTokenKeyFile, "APELORA_STATE_DIR/" + oidc.TokenKeyFile, "file holding the key (32 random bytes, base64) the provider's refresh tokens are sealed with in the database (made, mode 0600, on first start when missing); give every replica the same file; a lost key costs SSO users a sign-in, nothing more"},
	}
}

// ssoConfig reads APELORA_OIDC_*: all of the issuer, the client ID and the mapping, or none.
func ssoConfig(get func(string, string) string, publicURL string) (SSOConfig, error) {
	set := map[string]string{} // every variable read, so `apelora env` and docs/configuration.md list what is read
	for _, v := range []string{EnvOIDCIssuer, EnvOIDCClientID, EnvOIDCClientSecretFile, EnvOIDCScopes, EnvOIDCGroupsClaim, EnvOIDCGroupPermissions,
		EnvOIDCRecheckInterval, EnvOIDCTokenKeyFile} {
		set[v] = get(v, "")
	}
	c := SSOConfig{Issuer: set[EnvOIDCIssuer]}
	if c.Issuer == "" {
		for _, v := range []string{EnvOIDCClientID, EnvOIDCClientSecretFile, EnvOIDCGroupPermissions, EnvOIDCRecheckInterval, EnvOIDCTokenKeyFile} {
			if set[v] != "" {
				return c, fmt.Errorf("%s is set but %s is not: set the issuer too, or unset %s", v, EnvOIDCIssuer, v)
			}
		}
		return c, nil
	}
	u, err := url.Parse(c.Issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname()))) {
		return c, fmt.Errorf("%s=%q: give the issuer's https URL (plain http only to loopback), as its discovery document names it", EnvOIDCIssuer, c.Issuer)
	}
	if publicURL == "" {
		return c, fmt.Errorf("%s is set but APELORA_PUBLIC_URL is not: the provider sends browsers back to APELORA_PUBLIC_URL%s, so set it to the URL administrators open the console at", EnvOIDCIssuer, server.SSOCallbackPath)
	}
	if c.ClientID = get(EnvOIDCClientID, ""); c.ClientID == "" {
		return c, fmt.Errorf("%s is set but %s is not: give Apelora's client ID at the issuer", EnvOIDCIssuer, EnvOIDCClientID)
	}
	if f := get(EnvOIDCClientSecretFile, ""); f != "" {
		if c.ClientSecret, err = readSecretFile(f); err != nil {
			return c, fmt.Errorf("%s=%s: %w", EnvOIDCClientSecretFile, f, err)
		}
	}
	c.Scopes = strings.Fields(get(EnvOIDCScopes, defaultOIDCScopes))
	c.GroupsClaim = get(EnvOIDCGroupsClaim, defaultOIDCGroupsClaim)
	m := get(EnvOIDCGroupPermissions, "")
	if m == "" {
		return c, fmt.Errorf("%s is set but %s is not: map at least one of the provider's groups to permissions, e.g. apelora-admins=manage-infrastructure (with none, nobody could sign in)", EnvOIDCIssuer, EnvOIDCGroupPermissions)
	}
	if c.Groups, err = identity.ParseGroupPermissions(m); err != nil {
		return c, fmt.Errorf("%s: %w", EnvOIDCGroupPermissions, err)
	}
	if c.Recheck, err = boundedDuration(EnvOIDCRecheckInterval, get(EnvOIDCRecheckInterval, durationText(identity.DefaultSSORecheckInterval)),
		minOIDCRecheckInterval, maxOIDCRecheckInterval, identity.DefaultSSORecheckInterval, "how long the identity provider's word on a user's groups holds"); err != nil {
		return c, err
	}
	c.TokenKeyFile = set[EnvOIDCTokenKeyFile]
	return c, nil
}

// TokenKeyPath is the file of the key the provider's refresh tokens are sealed with:
// APELORA_OIDC_TOKEN_KEY_FILE, else in the state folder; "" for a Config built in code
// with neither.
func (c Config) TokenKeyPath() string {
	if c.SSO.TokenKeyFile != "" {
		return c.SSO.TokenKeyFile
	}
	if c.StateDir != "" {
		return filepath.Join(c.StateDir, oidc.TokenKeyFile)
	}
	return ""
}

// tokenKey loads the sealer of the provider's refresh tokens, making its key on first
// start. A Config built in code with no state folder (tests) seals with a key of this
// process's own: its sessions' tokens do not open after a restart, so those sessions lapse
// to view-only until their users sign in again.
func (c Config) tokenKey(log *slog.Logger) (*oidc.TokenKey, error) {
	path := c.TokenKeyPath()
	if path == "" {
		log.Warn("no APELORA_STATE_DIR or " + EnvOIDCTokenKeyFile + ": the identity provider's refresh tokens are sealed with a key that ends with this process")
		return oidc.NewRandomTokenKey()
	}
	k, made, err := oidc.LoadOrCreateTokenKey(path)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, EnvOIDCTokenKeyFile)
	}
	if made {
		log.Info("made the key the identity provider's refresh tokens are sealed with: give every replica the same file ("+EnvOIDCTokenKeyFile+")", "file", path)
	}
	return k, nil
}

func loopbackHost(h string) bool {
	return h == "localhost" || strings.HasPrefix(h, "127.") || h == "::1"
}

// readSecretFile reads a secret that only its owner (root or this server's user) may read.
func readSecretFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("the file is readable by others (mode %04o): chmod 600 it", fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("the file belongs to user %d: chown it to root or to the user Apelora runs as", st.Uid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", errors.New("the file is empty: put the client secret in it, or unset the variable for a public client")
	}
	return s, nil
}

// sso builds single sign-on, or nil when it is not configured.
func (c Config) sso(store *postgres.Store, log *slog.Logger) (*identity.SSO, error) {
	if c.SSO.Issuer == "" {
		return nil, nil
	}
	p := oidc.New(oidc.Config{Issuer: c.SSO.Issuer, ClientID: c.SSO.ClientID, ClientSecret: c.SSO.ClientSecret,
		RedirectURL: c.PublicURL + server.SSOCallbackPath, Scopes: c.SSO.Scopes, GroupsClaim: c.SSO.GroupsClaim,
		Timeout: c.upstreamTimeout()})
	key, err := c.tokenKey(log)
	if err != nil {
		return nil, err
	}
	return &identity.SSO{Provider: p, Store: store, Groups: c.SSO.Groups, Issuer: c.SSO.Issuer,
		Recheck: c.SSO.Recheck, Tokens: key, Log: log}, nil
}
