package maas

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/apelora/fabric/internal/apperr"
)

// Machine operations that move a machine through MAAS's lifecycle: commission, test,
// allocate, deploy, release, abort.

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
	// UserDataShown is how a plan shows the user data (what the administrator approves,
	// with no secret and no clock in it); empty: its size and SHA-256 (plan.Secret).
	UserDataShown string
	Comment       string
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
		call{method: http.MethodPost, path: machinePath(systemID), op: "deploy", params: p, shownUserData: o.UserDataShown})
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
