package incus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Member is a cluster member as GET /1.0/cluster/members/{name} shows it.
type Member struct {
	ServerName string `json:"server_name"`
	URL        string `json:"url"`
	// Roles holds the stored roles (event-hub, ovn-chassis) and the ones raft derives
	// (database, database-leader, database-standby).
	Roles         []string          `json:"roles"`
	FailureDomain string            `json:"failure_domain"`
	Description   string            `json:"description"`
	Config        map[string]string `json:"config"` // scheduler.instance and user.* keys
	Groups        []string          `json:"groups"`
	Status        string            `json:"status"`  // Online, Offline, Evacuated, Blocked
	Message       string            `json:"message"` // e.g. "Fully operational"
	Architecture  string            `json:"architecture"`
	Database      bool              `json:"database"`
}

// Member status values.
const (
	MemberOnline    = "Online"
	MemberOffline   = "Offline"
	MemberEvacuated = "Evacuated"
	MemberBlocked   = "Blocked"
)

// MemberPut holds the writable fields of a member. A PUT rewrites every one of them: a
// missing role list drops the stored roles (event-hub, ovn-chassis), empty groups or an
// empty failure domain are refused, and a missing description becomes "". Start from
// Member.Put() of a fresh read and change only what you mean to change.
type MemberPut struct {
	Config        map[string]string `json:"config"`
	Description   string            `json:"description"`
	Roles         []string          `json:"roles"`
	FailureDomain string            `json:"failure_domain"`
	Groups        []string          `json:"groups"`
}

// Put returns a copy of the member's writable fields, ready to edit and send back with
// UpdateMember. Roles include the derived database roles; Incus accepts them back and
// requires "database" to stay on a voter.
func (m Member) Put() MemberPut {
	cfg := maps.Clone(m.Config)
	if cfg == nil {
		cfg = map[string]string{}
	}
	return MemberPut{
		Config:        cfg,
		Description:   m.Description,
		Roles:         slices.Clone(m.Roles),
		FailureDomain: m.FailureDomain,
		Groups:        slices.Clone(m.Groups),
	}
}

// Members lists the cluster members (GET /1.0/cluster/members?recursion=1). Members that
// are still joining, and names that only have a pending join token, are not listed.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var ms []Member
	_, err := c.get(ctx, "/1.0/cluster/members", url.Values{"recursion": {"1"}}, &ms)
	if err == nil && c.eps != nil {
		// The cluster's own list of its members is where the client learns whom else it may
		// ask (see endpoints.go).
		urls := make([]string, len(ms))
		for i, m := range ms {
			urls[i] = m.URL
		}
		if c.eps.learn(urls) {
			c.hc.CloseIdleConnections()
		}
	}
	return ms, err
}

// Member reads one member and the ETag to send back with UpdateMember. An unknown name
// gives an error matching ErrNotFound.
func (c *Client) Member(ctx context.Context, name string) (Member, string, error) {
	var m Member
	res, err := c.get(ctx, "/1.0/cluster/members/"+seg(name), nil, &m)
	if err != nil {
		return Member{}, "", err
	}
	return m, res.etag, nil
}

// UpdateMember replaces the member's writable fields (PUT /1.0/cluster/members/{name})
// guarded by If-Match: etag (from Member). A stale ETag gives an error matching
// ErrPreconditionFailed; read again and retry.
//
// PUT rewrites every writable field: callers must send back the roles, groups, failure
// domain and description they read (use Member.Put), or those are changed too. The etag
// is required, so a write never silently overwrites someone else's change.
func (c *Client) UpdateMember(ctx context.Context, name string, put MemberPut, etag string) error {
	if etag == "" {
		return fmt.Errorf("update member %q: an ETag from Member is required", name)
	}
	if err := put.validate(); err != nil {
		return fmt.Errorf("update member %q: %w", name, err)
	}
	if put.Config == nil {
		put.Config = map[string]string{}
	}
	if put.Roles == nil {
		put.Roles = []string{}
	}
	_, err := c.call(ctx, request{
		method:  http.MethodPut,
		path:    "/1.0/cluster/members/" + seg(name),
		body:    put,
		ifMatch: etag,
	}, nil)
	return err
}

// validate mirrors what Incus 6.0.4 checks, so a bad request is refused before it is sent.
func (p MemberPut) validate() error {
	if len(p.Groups) == 0 {
		return errors.New("a member must belong to at least one cluster group (send back the groups you read)")
	}
	if strings.TrimSpace(p.FailureDomain) == "" {
		return errors.New("the failure domain must not be empty (send back the one you read, e.g. \"default\")")
	}
	for k, v := range p.Config {
		switch {
		case strings.HasPrefix(k, "user."):
		case k == "scheduler.instance":
			if v != "" && v != "all" && v != "group" && v != "manual" {
				return fmt.Errorf("scheduler.instance must be all, group or manual, not %q", v)
			}
		default:
			return fmt.Errorf("member config key %q is not allowed (only scheduler.instance and user.*)", k)
		}
	}
	return nil
}

// DeleteMember removes a member (DELETE /1.0/cluster/members/{name}). Unforced, the
// member must hold no instances, volumes or images that exist only there, and it is told
// to leave. Forced (?force=1), the checks are skipped and the member is never contacted:
// its daemon still believes it is clustered and must be wiped.
func (c *Client) DeleteMember(ctx context.Context, name string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"1"}} // Incus reads force as an integer; "true" would mean unforced
	}
	_, err := c.call(ctx, request{method: http.MethodDelete, path: "/1.0/cluster/members/" + seg(name), query: q, leaving: name}, nil)
	if err == nil && c.eps != nil {
		// Its URL leaves the learned list with the next member list; until then the member
		// is not asked first.
		c.forgetMember(name)
	}
	return err
}

// leave moves the client off the member name before a request that removes it is sent:
// the request, and every call after it, go through another member (a removed member's
// daemon stays up, presenting a certificate of its own, seen live on 6.0.4).
func (c *Client) leave(ctx context.Context, name string) {
	if c.eps == nil {
		return
	}
	var m Member
	if _, err := c.send(ctx, request{method: http.MethodGet, path: "/1.0/cluster/members/" + seg(name)}, &m); err == nil && m.URL != "" {
		c.Avoid(m.URL)
		c.eps.mu.Lock()
		c.eps.leaving = strings.TrimRight(m.URL, "/")
		c.eps.mu.Unlock()
	}
}

// forgetMember drops the removed member's URL (noted by leave) from the learned list.
func (c *Client) forgetMember(string) {
	c.eps.mu.Lock()
	defer c.eps.mu.Unlock()
	if c.eps.leaving == "" {
		return
	}
	c.eps.members = slices.DeleteFunc(c.eps.members, func(u string) bool { return u == c.eps.leaving })
	c.eps.leaving = ""
}

// MemberState is GET /1.0/cluster/members/{name}/state. Sizes are in bytes.
type MemberState struct {
	SysInfo struct {
		Uptime       int64     `json:"uptime"`
		LoadAverages []float64 `json:"load_averages"`
		TotalRAM     uint64    `json:"total_ram"`
		FreeRAM      uint64    `json:"free_ram"`
		SharedRAM    uint64    `json:"shared_ram"`
		BufferedRAM  uint64    `json:"buffered_ram"`
		TotalSwap    uint64    `json:"total_swap"`
		FreeSwap     uint64    `json:"free_swap"`
		Processes    int       `json:"processes"`
	} `json:"sysinfo"`
	StoragePools map[string]PoolState `json:"storage_pools"`
}

// PoolState is the usage of one pool on one member.
type PoolState struct {
	Space struct {
		Used  uint64 `json:"used"`
		Total uint64 `json:"total"`
	} `json:"space"`
	Inodes struct {
		Used  uint64 `json:"used"`
		Total uint64 `json:"total"`
	} `json:"inodes"`
}

// MemberState reads a member's load, memory and pool usage (forwarded to the member).
func (c *Client) MemberState(ctx context.Context, name string) (MemberState, error) {
	var st MemberState
	_, err := c.get(ctx, "/1.0/cluster/members/"+seg(name)+"/state", nil, &st)
	return st, err
}
