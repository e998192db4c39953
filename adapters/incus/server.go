package incus

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// ServerInfo is what GET /1.0 says about one member.
type ServerInfo struct {
	ServerName             string
	ServerVersion          string // e.g. "6.0.4"
	APIExtensions          int    // number of API extensions; members of one cluster must agree
	Kernel                 string // "Linux"
	KernelVersion          string // e.g. "6.12.8-amd64"
	KernelArchitecture     string // e.g. "x86_64"
	Architectures          []string
	OSName                 string // e.g. "Debian GNU/Linux"
	OSVersion              string // e.g. "12"
	ServerClustered        bool
	CertificateFingerprint string // of the certificate the member presents (the cluster certificate)
	// Certificate is that certificate (PEM), as Incus gives it (environment.certificate).
	Certificate string
	// Auth is "trusted" or "untrusted" (how Incus sees this client).
	Auth string
	// Config is the server configuration: the member's own keys (core.https_address …) and
	// the cluster-wide keys that are set. Keys left at their default are absent.
	Config map[string]string
}

type serverJSON struct {
	Config        map[string]any `json:"config"`
	APIExtensions []string       `json:"api_extensions"`
	Auth          string         `json:"auth"`
	Environment   struct {
		ServerName             string   `json:"server_name"`
		ServerVersion          string   `json:"server_version"`
		Kernel                 string   `json:"kernel"`
		KernelVersion          string   `json:"kernel_version"`
		KernelArchitecture     string   `json:"kernel_architecture"`
		Architectures          []string `json:"architectures"`
		OSName                 string   `json:"os_name"`
		OSVersion              string   `json:"os_version"`
		ServerClustered        bool     `json:"server_clustered"`
		CertificateFingerprint string   `json:"certificate_fingerprint"`
		Certificate            string   `json:"certificate"`
	} `json:"environment"`
}

// ServerInfo reads GET /1.0, from the member the client talks to when target is "", or
// from member target (forwarded with ?target=). An untrusted client gets an error matching
// ErrUntrusted (Incus answers GET /1.0 even then, without the environment).
func (c *Client) ServerInfo(ctx context.Context, target string) (ServerInfo, error) {
	var s serverJSON
	if _, err := c.get(ctx, "/1.0", targetQuery(target), &s); err != nil {
		return ServerInfo{}, err
	}
	return c.serverInfo(s)
}

// AskMember reads GET /1.0 from the member at url itself (its URL in the member list),
// not forwarded and never another member: whether that member's own API answers. The
// connection is pinned to the cluster certificate like every other; bounded by the call's
// timeout. Over the unix socket it is ServerInfo of the local daemon.
func (c *Client) AskMember(ctx context.Context, url string) (ServerInfo, error) {
	if c.eps == nil {
		return c.ServerInfo(ctx, "")
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var s serverJSON
	base := strings.TrimRight(url, "/")
	if _, err := c.attempt(parent, ctx, c.timeout, base, base, request{method: http.MethodGet, path: "/1.0"}, nil, &s); err != nil {
		return ServerInfo{}, err
	}
	return c.serverInfo(s)
}

func (c *Client) serverInfo(s serverJSON) (ServerInfo, error) {
	info := ServerInfo{
		ServerName:             s.Environment.ServerName,
		ServerVersion:          s.Environment.ServerVersion,
		APIExtensions:          len(s.APIExtensions),
		Kernel:                 s.Environment.Kernel,
		KernelVersion:          s.Environment.KernelVersion,
		KernelArchitecture:     s.Environment.KernelArchitecture,
		Architectures:          s.Environment.Architectures,
		OSName:                 s.Environment.OSName,
		OSVersion:              s.Environment.OSVersion,
		ServerClustered:        s.Environment.ServerClustered,
		CertificateFingerprint: s.Environment.CertificateFingerprint,
		Certificate:            s.Environment.Certificate,
		Auth:                   s.Auth,
		Config:                 stringMap(s.Config),
	}
	if s.Auth != "trusted" {
		return info, fmt.Errorf("GET /1.0 at %s: %w (auth %q); trust Apelora's certificate with "+
			"`incus config trust add-certificate <client.crt>` on a member", c.Endpoint(), ErrUntrusted, s.Auth)
	}
	return info, nil
}

// GetServerConfig returns the server configuration from GET /1.0: cluster-wide keys such
// as cluster.healing_threshold or cluster.offline_threshold when they are set (absent keys
// are at their default), and the member's own keys.
func (c *Client) GetServerConfig(ctx context.Context) (map[string]string, error) {
	info, err := c.ServerInfo(ctx, "")
	if err != nil {
		return nil, err
	}
	return info.Config, nil
}

// stringMap converts a JSON object of scalars into strings (Incus sends strings, but
// older servers have sent numbers and booleans in config maps).
func stringMap(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch v := v.(type) {
		case string:
			out[k] = v
		case nil:
			out[k] = ""
		default:
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// ClusterInfo is GET /1.0/cluster.
type ClusterInfo struct {
	ServerName string `json:"server_name"`
	Enabled    bool   `json:"enabled"`
	// MemberConfig lists the member-specific keys of pools and networks that a joining
	// member should supply values for (Value is always "" here).
	MemberConfig []MemberConfigKey `json:"member_config"`
}

// MemberConfigKey is one member-specific key of a storage pool or network.
type MemberConfigKey struct {
	Entity      string `json:"entity"` // "storage-pool" or "network"
	Name        string `json:"name"`
	Key         string `json:"key"`
	Value       string `json:"value"`
	Description string `json:"description"`
}

// Cluster reads GET /1.0/cluster from the member the client talks to.
func (c *Client) Cluster(ctx context.Context) (ClusterInfo, error) {
	var ci ClusterInfo
	_, err := c.get(ctx, "/1.0/cluster", nil, &ci)
	sort.SliceStable(ci.MemberConfig, func(i, j int) bool {
		a, b := ci.MemberConfig[i], ci.MemberConfig[j]
		if a.Entity != b.Entity {
			return a.Entity < b.Entity
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Key < b.Key
	})
	return ci, err
}

// PlacementScriptletKey is the cluster-wide setting that holds the placement scriptlet.
const PlacementScriptletKey = "instances.placement.scriptlet"

// PlacementScriptlet reads instances.placement.scriptlet ("" when unset) and the ETag of
// the server configuration (GET /1.0) it was read with.
func (c *Client) PlacementScriptlet(ctx context.Context) (string, string, error) {
	var s serverJSON
	res, err := c.get(ctx, "/1.0", nil, &s)
	if err != nil {
		return "", "", err
	}
	return stringMap(s.Config)[PlacementScriptletKey], res.etag, nil
}

// localKeys are the member's own settings that a rejected PATCH /1.0 wipes on Incus 6.0.4
// and 6.0.5 (see the package's Hazard).
var localKeys = []string{"core.https_address", "cluster.https_address"}

// SetPlacementScriptlet sets instances.placement.scriptlet to value ("" unsets it) with
// PATCH /1.0, if the server configuration still has etag. This is the package's one
// PATCH /1.0 (see Hazard): it carries that one key only, and when Incus rejects it the
// member's own settings are read again, and the error says which ones the rejection took
// and how to put them back before the daemon restarts.
func (c *Client) SetPlacementScriptlet(ctx context.Context, value, etag string) error {
	if etag == "" {
		return fmt.Errorf("set %s: an ETag from PlacementScriptlet is required", PlacementScriptletKey)
	}
	before, err := c.GetServerConfig(ctx)
	if err != nil {
		return fmt.Errorf("set %s: read the server configuration first: %w", PlacementScriptletKey, err)
	}
	_, err = c.call(ctx, request{
		method:  http.MethodPatch,
		path:    "/1.0",
		body:    map[string]any{"config": map[string]string{PlacementScriptletKey: value}},
		ifMatch: etag,
	}, nil)
	if err == nil || IsPreconditionFailed(err) {
		// A stale ETag is refused before Incus touches its configuration.
		return err
	}
	after, rerr := c.GetServerConfig(ctx)
	if rerr != nil {
		return fmt.Errorf("%w (and the server configuration could not be read again to see whether Incus kept the member's own settings (%s): check `incus config show` on %s): %v)", err, strings.Join(localKeys, ", "), c.Endpoint(), rerr)
	}
	var lost []string
	for _, k := range localKeys {
		if before[k] != "" && after[k] == "" {
			lost = append(lost, fmt.Sprintf("incus config set %s=%s", k, before[k]))
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("%w; Incus also dropped the member's own settings at %s when it refused: put them back before its daemon restarts with: %s", err, c.Endpoint(), strings.Join(lost, "; "))
	}
	return err
}
