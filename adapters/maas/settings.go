package maas

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"

	"github.com/apelora/fabric/internal/apperr"
)

// MAAS's own configuration settings (maas/?op=get_config), read-only: Apelora never
// changes MAAS itself.

var configNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,99}$`)

// GetConfig returns a MAAS configuration value as MAAS encodes it (JSON).
func (c *Client) GetConfig(ctx context.Context, name string) (json.RawMessage, error) {
	if !configNameRE.MatchString(name) {
		return nil, fmt.Errorf("read MAAS config: invalid name %q (lower-case letters, digits and _)", name)
	}
	var raw json.RawMessage
	err := c.do(ctx, call{method: http.MethodGet, path: "maas/", op: "get_config", params: url.Values{"name": {name}}}, &raw)
	if err != nil {
		return nil, fmt.Errorf("read MAAS config %s: %w", name, err)
	}
	return raw, nil
}

// GetConfigBool reads a boolean MAAS setting such as
// enable_disk_erasing_on_release.
func (c *Client) GetConfigBool(ctx context.Context, name string) (bool, error) {
	raw, err := c.GetConfig(ctx, name)
	if err != nil {
		return false, err
	}
	var b *bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("read MAAS config %s: not a boolean: %s", name, apperr.Quote(string(raw)))
	}
	return b != nil && *b, nil
}
