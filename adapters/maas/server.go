package maas

import (
	"context"
	"fmt"
	"net/http"
)

// The MAAS server itself: its version, and who the API key belongs to.

// Version is GET version/ (MAAS answers it without authentication; we sign
// it anyway, which MAAS accepts).
func (c *Client) Version(ctx context.Context) (VersionInfo, error) {
	var w struct {
		Version      string   `json:"version"`
		Subversion   string   `json:"subversion"`
		Capabilities []string `json:"capabilities"`
	}
	if err := c.do(ctx, call{method: http.MethodGet, path: "version/"}, &w); err != nil {
		return VersionInfo{}, fmt.Errorf("read MAAS version: %w", err)
	}
	return VersionInfo{Version: w.Version, Subversion: w.Subversion, Capabilities: w.Capabilities}, nil
}

// WhoAmI returns the MAAS user the API key belongs to. A 401 here means the
// key is wrong (errors.Is(err, ErrUnauthorized)).
func (c *Client) WhoAmI(ctx context.Context) (User, error) {
	var w struct {
		Username    string `json:"username"`
		Email       string `json:"email"`
		IsSuperuser bool   `json:"is_superuser"`
		IsLocal     bool   `json:"is_local"`
	}
	if err := c.do(ctx, call{method: http.MethodGet, path: "users/", op: "whoami"}, &w); err != nil {
		return User{}, fmt.Errorf("check MAAS credentials: %w", err)
	}
	return User{Username: w.Username, Email: w.Email, IsSuperuser: w.IsSuperuser, IsLocal: w.IsLocal}, nil
}
