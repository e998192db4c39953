package maas

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/apelora/fabric/apperr"
)

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

// MachineFilter narrows Machines. Empty fields do not filter; values within
// one field are ORed, fields are ANDed (MAAS's semantics).
type MachineFilter struct {
	SystemIDs []string
	Hostnames []string
	Statuses  []Status
	Zone      string
	Pool      string
}

func (f MachineFilter) values() (url.Values, error) {
	v := url.Values{}
	for _, id := range f.SystemIDs {
		if err := checkSystemID(id); err != nil {
			return nil, err
		}
		v.Add("id", id)
	}
	for _, h := range f.Hostnames {
		if h == "" {
			return nil, fmt.Errorf("machine filter: empty hostname")
		}
		v.Add("hostname", h)
	}
	for _, s := range f.Statuses {
		if !s.Valid() {
			return nil, fmt.Errorf("machine filter: unknown MAAS status %d", int(s))
		}
		v.Add("status", s.FilterName())
	}
	if f.Zone != "" {
		v.Set("zone", f.Zone)
	}
	if f.Pool != "" {
		v.Set("pool", f.Pool)
	}
	return v, nil
}

// Machines lists machines in one GET machines/ call, ordered as MAAS orders
// them (by creation).
func (c *Client) Machines(ctx context.Context, f MachineFilter) ([]Machine, error) {
	params, err := f.values()
	if err != nil {
		return nil, err
	}
	var ws []wireMachine
	if err := c.do(ctx, call{method: http.MethodGet, path: "machines/", params: params}, &ws); err != nil {
		return nil, fmt.Errorf("list MAAS machines: %w", err)
	}
	out := make([]Machine, len(ws))
	for i := range ws {
		out[i] = ws[i].machine()
	}
	return out, nil
}

// Machine reads one machine. An unknown system ID gives ErrNotFound.
func (c *Client) Machine(ctx context.Context, systemID string) (Machine, error) {
	if err := checkSystemID(systemID); err != nil {
		return Machine{}, err
	}
	return c.machineCall(ctx, fmt.Sprintf("read MAAS machine %s", systemID),
		call{method: http.MethodGet, path: machinePath(systemID)})
}

// CommissionOptions are commission's parameters.
type CommissionOptions struct {
	EnableSSH      bool // keep the machine on and reachable after commissioning
	SkipBMCConfig  bool
	SkipNetworking bool
	SkipStorage    bool
	// TestingScripts are script names or tags run after commissioning. Nil
	// leaves MAAS's default (tag "commissioning"); []string{"none"} runs none.
	TestingScripts []string
}

// Commission starts commissioning (MAAS allows it from New, Failed
// commissioning, Ready and Broken; otherwise ErrBadRequest).
func (c *Client) Commission(ctx context.Context, systemID string, o CommissionOptions) (Machine, error) {
	if err := checkSystemID(systemID); err != nil {
		return Machine{}, err
	}
	p := url.Values{}
	setTrue(p, "enable_ssh", o.EnableSSH)
	setTrue(p, "skip_bmc_config", o.SkipBMCConfig)
	setTrue(p, "skip_networking", o.SkipNetworking)
	setTrue(p, "skip_storage", o.SkipStorage)
	if err := setScripts(p, o.TestingScripts); err != nil {
		return Machine{}, err
	}
	return c.machineCall(ctx, fmt.Sprintf("commission MAAS machine %s", systemID),
		call{method: http.MethodPost, path: machinePath(systemID), op: "commission", params: p})
}

// TestOptions are test's parameters.
type TestOptions struct {
	// TestingScripts are script names or tags; nil means MAAS's default tag
	// "commissioning".
	TestingScripts []string
	EnableSSH      bool
}

// Test runs hardware tests. MAAS allows it from Ready, Broken, Allocated,
// Deployed, the Failed-* states and a few more; see the reference.
func (c *Client) Test(ctx context.Context, systemID string, o TestOptions) (Machine, error) {
	if err := checkSystemID(systemID); err != nil {
		return Machine{}, err
	}
	p := url.Values{}
	setTrue(p, "enable_ssh", o.EnableSSH)
	if err := setScripts(p, o.TestingScripts); err != nil {
		return Machine{}, err
	}
	return c.machineCall(ctx, fmt.Sprintf("test MAAS machine %s", systemID),
		call{method: http.MethodPost, path: machinePath(systemID), op: "test", params: p})
}

// AllocateOptions are allocate's parameters beyond the system ID.
type AllocateOptions struct {
	Comment string
}

// Allocate allocates exactly this Ready machine to the API key's user.
// A machine that is not available gives ErrConflict.
func (c *Client) Allocate(ctx context.Context, systemID string, o AllocateOptions) (Machine, error) {
	if err := checkSystemID(systemID); err != nil {
		return Machine{}, err
	}
	p := url.Values{"system_id": {systemID}}
	if o.Comment != "" {
		p.Set("comment", o.Comment)
	}
	return c.machineCall(ctx, fmt.Sprintf("allocate MAAS machine %s", systemID),
		call{method: http.MethodPost, path: "machines/", op: "allocate", params: p})
}

// DeployOptions are deploy's parameters.
type DeployOptions struct {
	// DistroSeries such as "noble"; empty means MAAS's default_distro_series.
	// The image must already be synced in MAAS.
	DistroSeries string
	// UserData is cloud-init user data; it is sent base64-encoded and may hold
	// secrets, so it never appears in errors or logs.
	UserData []byte
	Comment  string
}

// Deploy installs an OS on an Allocated (or Ready) machine; MAAS answers with
// the machine in Deploying.
func (c *Client) Deploy(ctx context.Context, systemID string, o DeployOptions) (Machine, error) {
	if err := checkSystemID(systemID); err != nil {
		return Machine{}, err
	}
	p := url.Values{}
	if o.DistroSeries != "" {
		p.Set("distro_series", o.DistroSeries)
	}
	if len(o.UserData) > 0 {
		p.Set("user_data", base64.StdEncoding.EncodeToString(o.UserData))
	}
	if o.Comment != "" {
		p.Set("comment", o.Comment)
	}
	m, err := c.machineCall(ctx, fmt.Sprintf("deploy MAAS machine %s", systemID),
		call{method: http.MethodPost, path: machinePath(systemID), op: "deploy", params: p})
	return m, scrubUserData(err, o.UserData)
}

// scrubUserData removes the user data from an error's text: it may hold a secret (a
// join token), and an error body that echoed it would carry it into logs and answers.
func scrubUserData(err error, userData []byte) error {
	var ae *APIError
	if err == nil || len(userData) == 0 || !errors.As(err, &ae) {
		return err
	}
	secrets := []string{base64.StdEncoding.EncodeToString(userData)}
	for _, line := range strings.Split(string(userData), "\n") {
		if line = strings.TrimSpace(line); len(line) >= 16 {
			secrets = append(secrets, line)
		}
	}
	scrub := func(s string) string {
		for _, x := range secrets {
			s = strings.ReplaceAll(s, x, "[user data]")
		}
		return s
	}
	ae.Message = scrub(ae.Message)
	for k, msgs := range ae.Fields {
		for i := range msgs {
			msgs[i] = scrub(msgs[i])
		}
		ae.Fields[k] = msgs
	}
	// Wrappers made their text when they were made: give the whole chain a scrubbed text,
	// keeping it for errors.Is and errors.As.
	return scrubbedError{text: scrub(err.Error()), err: err}
}

type scrubbedError struct {
	text string
	err  error
}

func (e scrubbedError) Error() string { return e.text }
func (e scrubbedError) Unwrap() error { return e.err }

// ReleaseOptions are release's parameters. MAAS also erases when its
// enable_disk_erasing_on_release config is on, whatever is sent here; read it
// with GetConfigBool to warn.
type ReleaseOptions struct {
	Erase       bool
	SecureErase bool // needs Erase
	QuickErase  bool // needs Erase
	Comment     string
}

// Release releases a machine back to Ready (through Releasing or Disk
// erasing). When Erase is set, secure_erase and quick_erase are always sent
// explicitly so MAAS never picks an erase mode we did not ask for.
func (c *Client) Release(ctx context.Context, systemID string, o ReleaseOptions) (Machine, error) {
	if err := checkSystemID(systemID); err != nil {
		return Machine{}, err
	}
	if !o.Erase && (o.SecureErase || o.QuickErase) {
		return Machine{}, fmt.Errorf("release MAAS machine %s: secure or quick erase needs Erase set too", systemID)
	}
	p := url.Values{}
	if o.Erase {
		p.Set("erase", "true")
		p.Set("secure_erase", boolStr(o.SecureErase))
		p.Set("quick_erase", boolStr(o.QuickErase))
	}
	if o.Comment != "" {
		p.Set("comment", o.Comment)
	}
	return c.machineCall(ctx, fmt.Sprintf("release MAAS machine %s", systemID),
		call{method: http.MethodPost, path: machinePath(systemID), op: "release", params: p})
}

// Abort stops the current commissioning, testing, deployment or disk erasing.
func (c *Client) Abort(ctx context.Context, systemID, comment string) (Machine, error) {
	if err := checkSystemID(systemID); err != nil {
		return Machine{}, err
	}
	p := url.Values{}
	if comment != "" {
		p.Set("comment", comment)
	}
	return c.machineCall(ctx, fmt.Sprintf("abort operation on MAAS machine %s", systemID),
		call{method: http.MethodPost, path: machinePath(systemID), op: "abort", params: p})
}

// PowerOff asks MAAS to power the machine off. sent is false when MAAS
// answered null (its driver cannot stop this machine). Even sent == true
// proves nothing: only a later QueryPowerState returning PowerOff does.
func (c *Client) PowerOff(ctx context.Context, systemID string, mode StopMode) (sent bool, err error) {
	if err := checkSystemID(systemID); err != nil {
		return false, err
	}
	switch mode {
	case "":
		mode = StopHard
	case StopHard, StopSoft:
	default:
		return false, fmt.Errorf("power off MAAS machine %s: unknown stop mode %q (use %q or %q)", systemID, mode, StopHard, StopSoft)
	}
	var w *wireMachine
	err = c.do(ctx, call{method: http.MethodPost, path: machinePath(systemID), op: "power_off",
		params: url.Values{"stop_mode": {string(mode)}}}, &w)
	if err != nil {
		return false, fmt.Errorf("power off MAAS machine %s: %w", systemID, err)
	}
	return w != nil, nil
}

// QueryPowerState asks MAAS to query the power controller now (MAAS waits up
// to 60 s for the BMC). Machines whose power type cannot be queried, such as
// "manual", give ErrPowerNotQueryable.
func (c *Client) QueryPowerState(ctx context.Context, systemID string) (PowerState, error) {
	if err := checkSystemID(systemID); err != nil {
		return "", err
	}
	var w struct {
		State string `json:"state"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: machinePath(systemID), op: "query_power_state",
		timeout: c.cfg.PowerQueryTimeout}, &w)
	if err != nil {
		return "", fmt.Errorf("query power state of MAAS machine %s: %w", systemID, err)
	}
	switch s := PowerState(w.State); s {
	case PowerOn, PowerOff, PowerUnknown, PowerError:
		return s, nil
	default:
		return "", fmt.Errorf("query power state of MAAS machine %s: MAAS answered an unknown state %q", systemID, w.State)
	}
}

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

func (c *Client) machineCall(ctx context.Context, what string, cl call) (Machine, error) {
	var w wireMachine
	if err := c.do(ctx, cl, &w); err != nil {
		return Machine{}, fmt.Errorf("%s: %w", what, err)
	}
	return w.machine(), nil
}

// MAAS system IDs are short lower-case strings; anything with a slash or
// other URL syntax must never reach a path.
var systemIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkSystemID(id string) error {
	if !systemIDRE.MatchString(id) {
		return fmt.Errorf("invalid MAAS system ID %s: expected letters and digits such as \"k7qpwx\"", apperr.Quote(id))
	}
	return nil
}

func machinePath(id string) string { return "machines/" + id + "/" }

func setTrue(p url.Values, k string, v bool) {
	if v {
		p.Set(k, "true")
	}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// setScripts sends script names as ONE comma-separated value: MAAS reads the
// field with QueryDict.get, so repeated keys would keep only the last name.
func setScripts(p url.Values, names []string) error {
	if names == nil {
		return nil
	}
	if len(names) == 0 {
		return fmt.Errorf("testing scripts: empty list; leave it nil for MAAS's default or use [\"none\"]")
	}
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, ", \t\r\n") {
			return fmt.Errorf("testing scripts: invalid name %s (no commas or spaces)", apperr.Quote(n))
		}
	}
	p.Set("testing_scripts", strings.Join(names, ","))
	return nil
}
