package maas_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

// TestKeyNeverLeaks drives many failing and succeeding calls, then searches
// every error string, every fmt and slog rendering of Config and Client, and
// everything the simulator recorded for the key or any part of it.
func TestKeyNeverLeaks(t *testing.T) {
	e := newEnv(t, withTLS(sim.TLSSelfSignedLeaf), withMachines(
		owned(spec("depl01", sim.StatusDeployed, "ipmi"), "apelora"),
		owned(spec("man001", sim.StatusDeployed, "manual"), "apelora"),
		spec("rdy001", sim.StatusReady, "ipmi")))
	consumer, token, secret := splitKey(e.key)
	var haystack []string
	add := func(s string) { haystack = append(haystack, s) }
	addErr := func(err error) {
		if err != nil {
			add(err.Error())
			add(fmt.Sprintf("%+v", err))
			add(fmt.Sprintf("%#v", err))
		}
	}

	// Failures of every kind with the right key.
	_, err := e.client.Machine(ctx, "nosuch")
	addErr(err)
	_, err = e.client.QueryPowerState(ctx, "man001")
	addErr(err)
	_, err = e.client.Deploy(ctx, "depl01", maas.DeployOptions{UserData: []byte("token-in-user-data")})
	addErr(err)
	_, err = e.client.Commission(ctx, "depl01", maas.CommissionOptions{})
	addErr(err)
	e.sim.FailNext(10, sim.FaultUnavailable)
	_, err = e.client.WhoAmI(ctx)
	addErr(err)
	_, _ = e.client.Machines(ctx, maas.MachineFilter{})
	_, _ = e.client.Release(ctx, "depl01", maas.ReleaseOptions{Erase: true})

	// Wrong parts: MAAS echoes the token key and (for a bad PLAINTEXT
	// signature) the real secret.
	for _, k := range []string{
		consumer + ":" + token + ":wrongsecretwrongsecretwrongsecre",
		consumer + ":wrongtokenwrongtok:" + secret,
		"wrongconsumerwrong:" + token + ":" + secret,
	} {
		c, err := e.clientWith(t, func(c *maas.Config) { c.APIKey = k })
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.WhoAmI(ctx)
		addErr(err)
		add(fmt.Sprintf("%v %+v %#v %s %d %x %q", c, c, c, c, c, c, c))
	}
	// Configuration errors.
	for _, k := range []string{e.key + ":extra", consumer + "::" + secret, consumer + ":" + token, " " + secret + " "} {
		_, err := maas.New(maas.Config{BaseURL: "https://maas.example/MAAS", APIKey: k})
		if err == nil {
			t.Fatalf("malformed key accepted")
		}
		addErr(err)
	}
	_, err = maas.New(maas.Config{BaseURL: "http://10.1.1.1/MAAS", APIKey: e.key})
	addErr(err)

	cfg := maas.Config{BaseURL: e.ep.BaseURL, APIKey: e.key, CAFile: "/etc/apelora/maas-ca.pem"}
	add(fmt.Sprintf("%v|%+v|%#v|%s|%d|%x|%q|%T", cfg, cfg, cfg, cfg, cfg, cfg, cfg, cfg))
	add(fmt.Sprintf("%v|%+v|%#v|%s|%d|%x|%q", &cfg, &cfg, &cfg, &cfg, &cfg, &cfg, &cfg))
	add(fmt.Sprintf("%v|%+v|%#v|%s|%d|%x", e.client, e.client, e.client, e.client, e.client, e.client))
	add(fmt.Sprintf("%+v", struct{ C maas.Config }{cfg}))
	b, _ := json.Marshal(cfg)
	add(string(b))
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("config", "maas", cfg, "client", e.client)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "maas", cfg, "client", e.client)
	add(logs.String())

	for _, r := range e.sim.Requests() {
		add(fmt.Sprintf("%+v %v", r, r.FormKeys()))
		if strings.Contains(fmt.Sprint(r.Form), "token-in-user-data") {
			t.Fatalf("recorded user data: %+v", r)
		}
	}

	if len(haystack) < 20 {
		t.Fatalf("only %d renderings collected", len(haystack))
	}
	for _, h := range haystack {
		for name, part := range map[string]string{"key": e.key, "consumer key": consumer, "token key": token, "secret": secret} {
			if strings.Contains(h, part) {
				t.Errorf("%s found in %q", name, h)
			}
		}
	}
	if !strings.Contains(fmt.Sprintf("%+v", cfg), "[redacted]") || !strings.Contains(logs.String(), "[redacted]") {
		t.Fatalf("redaction marker missing: %+v / %s", cfg, logs.String())
	}
}
