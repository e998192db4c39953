package e2e

import (
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// incusCounter counts the calls Apelora makes to Incus, by method and path.
type incusCounter struct {
	mu    sync.Mutex
	calls map[string]int
	next  http.RoundTripper
}

func (c *incusCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.calls[r.Method+" "+r.URL.Path]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *incusCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

// isMAASList: the whole machine list (GET machines/ with no filter).
func isMAASList(r sim.Request) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/machines/") && r.Op == "" &&
		len(r.Form["hostname"]) == 0 && len(r.Form["id"]) == 0
}

var memberPath = regexp.MustCompile(`^/1\.0/cluster/members/[^/]+$`)

// TestMutationPayloadsReadOneMachine: a mutation's answer reads the one machine it shows
// (MAAS by system id or by hostname, the one Incus member), never the MAAS machine list
// nor the Incus member list, whatever the fleet's size. Counted at the simulator and at a
// RoundTripper over the Incus transport; the counts per mutation are logged.
func TestMutationPayloadsReadOneMachine(t *testing.T) {
	parallel(t)
	lab := incuslab.Start(t, 1)
	m := producttest.StartMAAS(t, maasFleet())
	counter := &incusCounter{calls: map[string]int{}}
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config), func(cfg *app.Config) {
		cfg.Incus.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	})
	admin := e.Identity("admin", identity.ManageInfrastructure)

	steps := []struct {
		name, query string
		vars        map[string]any
		// memberList: the Incus member list the step itself needs (its own checks), not
		// its answer.
		memberList int
	}{
		{"registerMachine (MAAS)", `mutation { registerMachine(input: {name: "node-a", provisioner: MAAS, maasSystemId: "aaaa01"}) { machine { name phase maas { systemId status } member { status } } } }`, nil, 0},
		{"registerMachine (manual)", `mutation { registerMachine(input: {name: "node-m", provisioner: MANUAL}) { machine { name phase } } }`, nil, 0},
		{"commissionMachine", `mutation { commissionMachine(input: {systemId: "aaaa01", tests: []}) { maas { status } machine { name phase maas { status } } } }`, nil, 1},
		{"approveEnrolment", `mutation { approveEnrolment(input: {name: "node-m"}) { joinToken machine { name phase pendingJoinToken { expiresAt } } } }`, nil, 1},
		{"revokeJoinToken", `mutation { revokeJoinToken(input: {name: "node-m"}) { machine { name phase } } }`, nil, 1},
		{"machine query", `{ machine(name: "node-a") { name phase maas { status } } }`, nil, 0},
		{"machine query (a member)", `{ machine(name: "` + lab.Members[0].Name + `") { name phase member { status } } }`, nil, 0},
	}
	for _, s := range steps {
		m.Server.ResetRequests()
		counter.take()
		r := e.GQL(admin, s.query, s.vars)
		if len(r.Errors) > 0 {
			t.Fatalf("%s: %+v", s.name, r.Errors)
		}
		var lists, maasCalls int
		for _, req := range m.Server.Requests() {
			maasCalls++
			if isMAASList(req) {
				lists++
			}
		}
		incus := counter.take()
		var oneMember int
		var calls []string
		for k, n := range incus {
			calls = append(calls, k)
			if memberPath.MatchString(strings.TrimPrefix(k, "GET ")) && strings.HasPrefix(k, "GET ") {
				oneMember += n
			}
		}
		sort.Strings(calls)
		t.Logf("%s: MAAS %d calls (%d lists); Incus %v", s.name, maasCalls, lists, incus)
		if lists != 0 {
			t.Errorf("%s listed every MAAS machine %d times to answer for one", s.name, lists)
		}
		if got := incus["GET /1.0/cluster/members"]; got != s.memberList {
			t.Errorf("%s listed the Incus members %d times, want %d (its own checks only)", s.name, got, s.memberList)
		}
		if oneMember == 0 {
			t.Errorf("%s: the answer did not read its one member (GET /1.0/cluster/members/{name}): %v", s.name, calls)
		}
	}
}
