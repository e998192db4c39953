package app

import (
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/internal/server"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestMAASConfiguration(t *testing.T) {
	const key = "Fq2LmN8xRt4vBc7KpZ:Wd3sHj9QeA6yUo1GiT:r5Tn8Kc2Vx7Lm4Qz9Pw3Hs6Jd1Fb0Ya"
	cases := []struct {
		vars map[string]string
		says string // "" = accepted
	}{
		{map[string]string{}, ""},
		{map[string]string{"APELORA_MAAS_URL": "http://127.0.0.1:5240/MAAS", "APELORA_MAAS_API_KEY": key}, ""},
		{map[string]string{"APELORA_MAAS_URL": "http://10.1.2.3:5240/MAAS", "APELORA_MAAS_API_KEY": key}, "loopback"},
		{map[string]string{"APELORA_MAAS_URL": "https://maas.example:5240/MAAS"}, "APELORA_MAAS_API_KEY is not"},
		{map[string]string{"APELORA_MAAS_API_KEY": key}, "APELORA_MAAS_URL is not"},
		{map[string]string{"APELORA_MAAS_URL": "https://maas.example:5240/MAAS", "APELORA_MAAS_API_KEY": "only:two"}, "consumer"},
		{map[string]string{"APELORA_MAAS_URL": "https://maas.example:5240/MAAS", "APELORA_MAAS_API_KEY": key, "APELORA_MAAS_CA_FILE": "/nonexistent.pem"}, "nonexistent.pem"},
	}
	for _, c := range cases {
		cfg, err := ConfigFromEnv(env(c.vars))
		switch {
		case c.says == "" && err != nil:
			t.Errorf("%v refused: %v", c.vars, err)
		case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%v: %v, want an error saying %q", c.vars, err, c.says)
		}
		if err != nil {
			for _, part := range strings.Split(key, ":") {
				if strings.Contains(err.Error(), part) {
					t.Errorf("the error quotes the key: %v", err)
				}
			}
		}
		if c.says == "" && c.vars["APELORA_MAAS_URL"] != "" && cfg.MAAS.BaseURL == "" {
			t.Errorf("%v: MAAS left unconfigured", c.vars)
		}
	}
}

func TestBadValuesAreNamed(t *testing.T) {
	for name, value := range map[string]string{
		"APELORA_LOG_LEVEL":        "loud",
		"APELORA_WS_PING_INTERVAL": "10ms",
		"APELORA_SHUTDOWN_GRACE":   "soon",
		"APELORA_REQUEST_TIMEOUT":  "0s",
		"APELORA_PUBLIC_URL":       "apelora.example",
		"APELORA_INCUS_URL":        "https://10.0.0.5:8443",
	} {
		_, err := ConfigFromEnv(env(map[string]string{name: value}))
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(name, "")) && !strings.Contains(err.Error(), "APELORA_INCUS") {
			t.Errorf("%s=%s: %v", name, value, err)
		}
	}
}

// Variables and WorkerVariables list exactly the variables the server and the worker read:
// the names come from what ConfigFromEnv and WorkerConfigFromEnv ask the environment for,
// not from a list that could drift from them. `apelora env` prints those tables and
// docs/configuration.md is generated from them (internal/app/configdoc), so both list what is read.
func TestVariablesListExactlyTheVariablesRead(t *testing.T) {
	read := map[string]bool{}
	recording := func(vars map[string]string) func(string) string {
		return func(k string) string { read[k] = true; return vars[k] }
	}
	if _, err := ConfigFromEnv(recording(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := WorkerConfigFromEnv(recording(map[string]string{
		"APELORA_INCUS_SOCKET": "/run/incus/unix.socket",
		"APELORA_MAAS_URL":     "http://127.0.0.1:5240/MAAS",
		"APELORA_MAAS_API_KEY": "Fq2LmN8xRt4vBc7KpZ:Wd3sHj9QeA6yUo1GiT:r5Tn8Kc2Vx7Lm4Qz9Pw3Hs6Jd1Fb0Ya",
	})); err != nil {
		t.Fatal(err)
	}

	listed := map[string]Variable{}
	for _, v := range append(Variables(), WorkerVariables()...) {
		if _, twice := listed[v.Name]; twice {
			t.Errorf("%s is listed twice", v.Name)
		}
		listed[v.Name] = v
	}
	for name := range read {
		if _, ok := listed[name]; !ok && strings.HasPrefix(name, "APELORA_") {
			t.Errorf("%s is read but not in Variables or WorkerVariables (apelora env does not show it)", name)
		}
	}
	for name, v := range listed {
		if !read[name] {
			t.Errorf("%s is listed but never read", name)
		}
		if v.Default == "" || v.Meaning == "" {
			t.Errorf("%s has no default or no meaning: %+v", name, v)
		}
	}
}

func TestRequestTimeoutPolicy(t *testing.T) {
	for value, want := range map[string]time.Duration{"": DefaultRequestTimeout, "2s": 2 * time.Second, " 45s ": 45 * time.Second, "1s": time.Second, "2m": 2 * time.Minute} {
		cfg, err := ConfigFromEnv(env(map[string]string{EnvRequestTimeout: value}))
		if err != nil || cfg.RequestTimeout != want {
			t.Errorf("%s=%q: %v, %v; want %v", EnvRequestTimeout, value, cfg.RequestTimeout, err, want)
		}
	}
	for _, value := range []string{"soon", "10", "0", "-5s", "500ms", "2m1s", "1h", "10s; rm -rf /"} {
		_, err := ConfigFromEnv(env(map[string]string{EnvRequestTimeout: value}))
		if err == nil || !strings.Contains(err.Error(), EnvRequestTimeout) || !strings.Contains(err.Error(), "from 1s to 2m0s") {
			t.Errorf("%s=%q: %v, want an error naming the variable and the range", EnvRequestTimeout, value, err)
		}
	}

	// One bound reaches every client the server and the worker build.
	const key = "Fq2LmN8xRt4vBc7KpZ:Wd3sHj9QeA6yUo1GiT:r5Tn8Kc2Vx7Lm4Qz9Pw3Hs6Jd1Fb0Ya"
	vars := map[string]string{
		EnvRequestTimeout: "3s", "APELORA_MAAS_URL": "http://127.0.0.1:5240/MAAS", "APELORA_MAAS_API_KEY": key,
		"APELORA_INCUS_SOCKET": "/run/incus/unix.socket",
	}
	w, err := WorkerConfigFromEnv(env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if ic, mc := w.incusClient(nil), w.maasClient(nil); ic.Timeout != 3*time.Second || mc.RequestTimeout != 3*time.Second {
		t.Errorf("incus timeout %v, MAAS request timeout %v, want 3s for both", ic.Timeout, mc.RequestTimeout)
	}
	// A Config built in code (tests) gets the default, never an unbounded client.
	if ic := (Config{}).incusClient(nil); ic.Timeout != DefaultRequestTimeout {
		t.Errorf("zero Config: incus timeout %v", ic.Timeout)
	}
}

func TestDriftSettings(t *testing.T) {
	cfg, err := ConfigFromEnv(env(nil))
	if err != nil || cfg.DriftInterval != DefaultDriftInterval || cfg.DriftOfflineAfter != DefaultDriftOfflineAfter {
		t.Fatalf("defaults: %v %v %v", cfg.DriftInterval, cfg.DriftOfflineAfter, err)
	}
	cfg, err = ConfigFromEnv(env(map[string]string{EnvDriftInterval: "off", EnvDriftOfflineAfter: "90s"}))
	if err != nil || cfg.DriftInterval != 0 || cfg.DriftOfflineAfter != 90*time.Second {
		t.Fatalf("off: %v %v %v", cfg.DriftInterval, cfg.DriftOfflineAfter, err)
	}
	for name, values := range map[string][]string{
		EnvDriftInterval:     {"0", "500ms", "25h", "soon", "-1m", "OFF"},
		EnvDriftOfflineAfter: {"0", "off", "48h", "1"},
	} {
		for _, v := range values {
			if _, err := ConfigFromEnv(env(map[string]string{name: v})); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v, want an error naming the variable", name, v, err)
			}
		}
	}
}

func TestFleetRefreshInterval(t *testing.T) {
	cfg, err := ConfigFromEnv(env(nil))
	if err != nil || cfg.FleetRefreshInterval != fleet.DefaultRefreshInterval {
		t.Fatalf("default: %v %v", cfg.FleetRefreshInterval, err)
	}
	if cfg, err = ConfigFromEnv(env(map[string]string{EnvFleetRefreshInterval: "1m"})); err != nil || cfg.FleetRefreshInterval != time.Minute {
		t.Fatalf("1m: %v %v", cfg.FleetRefreshInterval, err)
	}
	for _, v := range []string{"0", "500ms", "25h", "soon", "-10s", "off"} {
		if _, err := ConfigFromEnv(env(map[string]string{EnvFleetRefreshInterval: v})); err == nil || !strings.Contains(err.Error(), EnvFleetRefreshInterval) {
			t.Errorf("%s=%q: %v, want an error naming the variable", EnvFleetRefreshInterval, v, err)
		}
	}
}

func TestStepConcurrency(t *testing.T) {
	cfg, err := ConfigFromEnv(env(nil))
	if err != nil || cfg.StepConcurrency != server.DefaultStepConcurrency {
		t.Fatalf("default: %v %v", cfg.StepConcurrency, err)
	}
	if cfg, err = ConfigFromEnv(env(map[string]string{EnvStepConcurrency: "32"})); err != nil || cfg.StepConcurrency != 32 {
		t.Fatalf("32: %v %v", cfg.StepConcurrency, err)
	}
	for _, v := range []string{"0", "-1", "257", "many", "1.5"} {
		if _, err := ConfigFromEnv(env(map[string]string{EnvStepConcurrency: v})); err == nil || !strings.Contains(err.Error(), EnvStepConcurrency) {
			t.Errorf("%s=%q: %v, want an error naming the variable", EnvStepConcurrency, v, err)
		}
	}
}

// The export's settings: a CA turns TLS on, TLS takes on or off only, the address must be
// host:port, the file an absolute path, and the interval stays within its bounds.
func TestAuditExportSettings(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{EnvAuditSyslogAddr: "siem.example:6514", EnvAuditSyslogTLSCA: "/etc/apelora/siem-ca.pem",
		EnvAuditJSONLFile: "/var/log/apelora/audit.jsonl"}))
	if err != nil || !cfg.AuditExport.SyslogTLS || cfg.AuditExport.SyslogAddr != "siem.example:6514" || cfg.AuditExport.Interval != time.Second {
		t.Fatalf("%+v %v", cfg.AuditExport, err)
	}
	sinks, err := AuditExport{SyslogAddr: "127.0.0.1:514", JSONLFile: "/tmp/a.jsonl"}.sinks()
	if err != nil || len(sinks) != 2 || sinks[0].Name() != "syslog tcp://127.0.0.1:514" || sinks[1].Name() != "jsonl /tmp/a.jsonl" {
		t.Fatalf("sinks: %v %v", sinks, err)
	}
	for name, value := range map[string]string{
		EnvAuditSyslogAddr: "siem.example", EnvAuditSyslogTLS: "yes", EnvAuditJSONLFile: "audit.jsonl",
		EnvAuditExportInterval: "10ms",
	} {
		if _, err := ConfigFromEnv(env(map[string]string{name: value})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v", name, value, err)
		}
	}
}
