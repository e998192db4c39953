package maas_test

import (
	"strings"
	"testing"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/machines"
)

// The client sends a system id exactly when the domain would take it: registration, fence
// mappings and the MAAS steps refuse what the client refuses, so an id the database or the
// domain would never store cannot reach MAAS through another path either.
func TestClientSendsOnlySystemIDsTheDomainAccepts(t *testing.T) {
	e := newEnv(t, withMachines(spec("k7qpwx", sim.StatusReady, "ipmi")))
	for _, id := range []string{
		"k7qpwx", "abcd", strings.Repeat("a", 16), // the domain accepts these
		"", "abc", strings.Repeat("a", 17), "K7QPWX", "AB-1", "k7q.px", "k7q_px", "k7qpwx/", "../users", "k7q%2f", "k7qpwx?op=x", "ü1234",
	} {
		domainOK := machines.ValidateSystemID("maasSystemId", id) == nil
		for name, call := range map[string]func() error{
			"Machine":         func() error { _, err := e.client.Machine(ctx, id); return err },
			"QueryPowerState": func() error { _, err := e.client.QueryPowerState(ctx, id); return err },
			"PowerOff":        func() error { _, err := e.client.PowerOff(ctx, id, maas.StopHard); return err },
		} {
			before := len(e.sim.Requests())
			err := call()
			sent := len(e.sim.Requests()) - before
			switch {
			case domainOK && sent == 0:
				t.Errorf("%s(%q): the domain accepts the id, but the client sent nothing: %v", name, id, err)
			case !domainOK && sent != 0:
				t.Errorf("%s(%q): the domain refuses the id, but the client sent %d requests", name, id, sent)
			case !domainOK && (err == nil || !strings.Contains(err.Error(), "invalid MAAS system ID")):
				t.Errorf("%s(%q): refused with %v, want the client's system id refusal", name, id, err)
			}
		}
	}
}
