package app

import (
	"strings"
	"testing"
	"time"
)

func workerEnv(over map[string]string) func(string) string {
	env := map[string]string{
		"APELORA_INCUS_SOCKET": "/run/incus/unix.socket",
		"APELORA_MAAS_URL":     "http://127.0.0.1:5240/MAAS",
		"APELORA_MAAS_API_KEY": "Fq2LmN8xRt4vBc7KpZ:Wd3sHj9QeA6yUo1GiT:r5Tn8Kc2Vx7Lm4Qz9Pw3Hs6Jd1Fb0Ya",
	}
	for k, v := range over {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

func TestWorkerConfigDefaults(t *testing.T) {
	c, err := WorkerConfigFromEnv(workerEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Limits
	if l.OfflineAfter != time.Minute || l.Cooldown != 15*time.Minute || l.ConfirmTimeout != 3*time.Minute ||
		l.MaxObservationGap != 30*time.Second || c.Poll != 5*time.Second || c.DrillInterval != time.Hour || c.Name == "" {
		t.Fatalf("defaults %+v", c)
	}
	c, err = WorkerConfigFromEnv(workerEnv(map[string]string{"APELORA_FENCE_POLL_INTERVAL": "20s", "APELORA_WORKER_NAME": "w7"}))
	if err != nil || c.Limits.MaxObservationGap != time.Minute || c.Name != "w7" {
		t.Fatalf("gap follows the poll interval: %+v %v", c, err)
	}
}

func TestWorkerConfigRefusalsNameTheVariable(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"APELORA_FENCE_COOLDOWN": "soon"}, "APELORA_FENCE_COOLDOWN"},
		{map[string]string{"APELORA_FENCE_OFFLINE_AFTER": "0s"}, "APELORA_FENCE_OFFLINE_AFTER"},
		{map[string]string{"APELORA_FENCE_COOLDOWN": "1m", "APELORA_FENCE_CONFIRM_TIMEOUT": "5m"}, "cooldown"},
		{map[string]string{"APELORA_MAAS_URL": "", "APELORA_MAAS_API_KEY": ""}, "APELORA_MAAS_URL"},
		{map[string]string{"APELORA_INCUS_SOCKET": ""}, "APELORA_INCUS_URL"},
		{map[string]string{"APELORA_FENCE_INCUS_URLS": "https://10.0.0.6:8443"}, "APELORA_FENCE_INCUS_URLS"},
	} {
		_, err := WorkerConfigFromEnv(workerEnv(c.env))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.env, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "r5Tn8Kc2Vx7Lm4Qz9Pw3Hs6Jd1Fb0Ya") {
			t.Errorf("an error carries the MAAS key: %v", err)
		}
	}
}

// One rule for the API and the worker: APELORA_INCUS_URL may list several members, and the
// worker's former APELORA_FENCE_INCUS_URLS is read as more of them (deprecated, warned of at
// start); a bad address in it is named.
func TestWorkerIncusAddresses(t *testing.T) {
	https := map[string]string{
		"APELORA_INCUS_SOCKET":      "",
		"APELORA_INCUS_URL":         "https://10.0.0.5:8443, https://10.0.0.6:8443/",
		"APELORA_INCUS_CLIENT_CERT": "/etc/apelora/client.crt",
		"APELORA_INCUS_CLIENT_KEY":  "/etc/apelora/client.key",
		"APELORA_INCUS_SERVER_CERT": "/etc/apelora/cluster.crt",
	}
	c, err := WorkerConfigFromEnv(workerEnv(https))
	if err != nil {
		t.Fatal(err)
	}
	if c.Incus.URL != "https://10.0.0.5:8443" || strings.Join(c.Incus.FallbackURLs, ",") != "https://10.0.0.6:8443" || len(c.DeprecatedFenceURLs) != 0 {
		t.Fatalf("APELORA_INCUS_URL's list: %+v", c.Incus)
	}
	https["APELORA_FENCE_INCUS_URLS"] = "https://10.0.0.7:8443"
	if c, err = WorkerConfigFromEnv(workerEnv(https)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Incus.FallbackURLs, ",") != "https://10.0.0.6:8443,https://10.0.0.7:8443" || strings.Join(c.DeprecatedFenceURLs, ",") != "https://10.0.0.7:8443" {
		t.Fatalf("the deprecated variable: %+v %v", c.Incus, c.DeprecatedFenceURLs)
	}
	https["APELORA_FENCE_INCUS_URLS"] = "http://10.0.0.7:8443"
	if _, err = WorkerConfigFromEnv(workerEnv(https)); err == nil || !strings.Contains(err.Error(), "APELORA_FENCE_INCUS_URLS") {
		t.Fatalf("a plain-HTTP fence URL: %v", err)
	}
}
