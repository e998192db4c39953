package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// The requirement: Incus calls per admission and per `machines` query are constant
// in the number of members. BenchmarkIncusCallsPerOperation measures them against real
// Incus clusters of 1 and 3 members with the real product in front, and reports
// incus-calls/op beside the time.
//
// How calls are counted: the Incus client writes one debug line ("incus request") per
// HTTP request it sends to its logger, which app.Build sets to the product's logger, and
// every line logged in a request's context carries that request's id. Each operation is
// sent with its own X-Request-Id, so a call is counted for the operation that caused it;
// a call in the window that belongs to no operation of the benchmark fails it.
//
// Member.version asks each member for its versions by design (one call per member in the
// answer, see the schema), so the fleet-wide query measured for the requirement leaves it
// out; machinesWithVersion is measured beside it to show what asking for it costs.

// memberSizes are the cluster sizes compared; the calls per operation must not differ.
var memberSizes = []int{1, 3}

const (
	machinesQuery = `{ machines { name phase warnings { code message } pendingJoinToken { expiresAt }
		record { name provisioner { kind } registeredBy }
		member { name status message url roles groups failureDomain description architecture held scheduler } } }`
	machinesWithVersionQuery = `{ machines { name phase member { name status held version { incus kernel os } } } }`
	reportQuery              = `query($n: String!) { admissionReport(name: $n) { runId verdict checks { name result } } }`
	admitMutation            = `mutation($n: String!) { admitMember(input: {name: $n}) { report { verdict } machine { phase } } }`
)

// operation is one measured GraphQL operation on a cluster whose last member is target.
type operation struct {
	name string
	// constant says the calls must not grow with the members.
	constant bool
	// prepare runs before each call, untimed and uncounted (its Incus calls go through the
	// lab's own client, which logs nowhere).
	prepare func(b *testing.B, p *product)
	run     func(b *testing.B, p *product, requestID string)
}

var operations = []operation{
	{name: "admissionReport", constant: true, run: func(b *testing.B, p *product, id string) {
		r := p.gql(b, id, reportQuery, map[string]any{"n": p.target})
		if v := dig(r, "admissionReport", "verdict"); v != "ADMISSIBLE" {
			b.Fatalf("admissionReport on %s: verdict %v: %v", p.target, v, r)
		}
	}},
	{name: "admitMember", constant: true,
		prepare: func(b *testing.B, p *product) {
			// Hold the member again, as enrol-member.sh leaves it, so every admission
			// does the whole step: checks and the one member update that releases it.
			if out, err := p.lab.CLI(p.lab.Members[0], "cluster", "set", p.target, "scheduler.instance=manual"); err != nil {
				b.Fatalf("hold %s again: %v: %s", p.target, err, out)
			}
		},
		run: func(b *testing.B, p *product, id string) {
			r := p.gql(b, id, admitMutation, map[string]any{"n": p.target})
			if v := dig(r, "admitMember", "report", "verdict"); v != "ADMISSIBLE" {
				b.Fatalf("admitMember %s: verdict %v: %v", p.target, v, r)
			}
		}},
	{name: "machines", constant: true, run: func(b *testing.B, p *product, id string) {
		r := p.gql(b, id, machinesQuery, nil)
		if ms, _ := r["machines"].([]any); len(ms) != p.members {
			b.Fatalf("machines lists %d machines, want %d: %v", len(ms), p.members, r)
		}
	}},
	{name: "machinesWithVersion", constant: false, run: func(b *testing.B, p *product, id string) {
		r := p.gql(b, id, machinesWithVersionQuery, nil)
		if ms, _ := r["machines"].([]any); len(ms) != p.members {
			b.Fatalf("machines lists %d machines, want %d: %v", len(ms), p.members, r)
		}
	}},
}

func BenchmarkIncusCallsPerOperation(b *testing.B) {
	// perOp[operation][members] is the calls per operation of the last run.
	perOp := map[string]map[int]float64{}
	for _, n := range memberSizes {
		p := startProduct(b, n)
		for _, op := range operations {
			b.Run(fmt.Sprintf("op=%s/members=%d", op.name, n), func(b *testing.B) {
				calls := p.measure(b, op)
				if perOp[op.name] == nil {
					perOp[op.name] = map[int]float64{}
				}
				perOp[op.name][n] = calls
			})
		}
	}
	for _, op := range operations {
		got := perOp[op.name]
		if !op.constant || len(got) < 2 {
			continue
		}
		first := got[memberSizes[0]]
		for _, n := range memberSizes[1:] {
			if c, ok := got[n]; ok && c != first {
				b.Errorf("%s: %.2f Incus calls with %d member(s) but %.2f with %d: the calls must not grow with the members",
					op.name, first, memberSizes[0], c, n)
			}
		}
	}
}

// product is a lab cluster with the product pointed at it and the last member registered.
type product struct {
	lab     *incuslab.Cluster
	env     *producttest.Env
	admin   string
	members int
	target  string // the last member: registered, admitted and reported on
	seq     int
}

func startProduct(b *testing.B, members int) *product {
	b.Helper()
	lab := incuslab.Start(b, members)
	env := producttest.Start(b, producttest.WithIncus(lab.Config))
	p := &product{lab: lab, env: env, admin: env.Identity("bench-admin", identity.ManageInfrastructure),
		members: members, target: lab.Members[members-1].Name}
	p.gql(b, "bench-setup", `mutation($n: String!) { registerMachine(input: {name: $n, provisioner: MANUAL}) { machine { name } } }`,
		map[string]any{"n": p.target})
	return p
}

// measure runs op b.N times and reports its Incus calls per operation.
func (p *product) measure(b *testing.B, op operation) float64 {
	b.Helper()
	start := len(p.env.Logs.String())
	prefix := fmt.Sprintf("bench-%s-%d-", op.name, p.seq)
	p.seq++
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if op.prepare != nil {
			b.StopTimer()
			op.prepare(b, p)
			b.StartTimer()
		}
		op.run(b, p, fmt.Sprintf("%s%d", prefix, i))
	}
	b.StopTimer()

	calls := incusCalls(b, p.env.Logs.String()[start:])
	total, first := 0, []string(nil)
	for id, paths := range calls {
		if !strings.HasPrefix(id, prefix) {
			b.Fatalf("%d Incus call(s) during the benchmark belong to no measured operation (request id %q): %v", len(paths), id, paths)
		}
		total += len(paths)
		if id == prefix+"0" {
			first = paths
		}
	}
	perOp := float64(total) / float64(b.N)
	b.ReportMetric(perOp, "incus-calls/op")
	if b.N == 1 || testing.Verbose() {
		b.Logf("%s with %d member(s): %.2f Incus calls per operation; the first sent %v", op.name, p.members, perOp, first)
	}
	return perOp
}

// incusCalls reads the product's JSON log and returns the Incus requests ("METHOD path")
// per request id.
func incusCalls(b *testing.B, log string) map[string][]string {
	b.Helper()
	out := map[string][]string{}
	for line := range strings.Lines(log) {
		if !strings.Contains(line, `"incus request"`) {
			continue
		}
		var l struct {
			Msg       string `json:"msg"`
			Method    string `json:"method"`
			Path      string `json:"path"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			b.Fatalf("undecodable log line %q: %v", line, err)
		}
		if l.Msg == "incus request" {
			out[l.RequestID] = append(out[l.RequestID], l.Method+" "+l.Path)
		}
	}
	for _, paths := range out {
		slices.Sort(paths)
	}
	return out
}

// gql posts one operation with the given request id and returns its data; any GraphQL
// error fails the benchmark.
func (p *product) gql(b *testing.B, requestID, query string, vars map[string]any) map[string]any {
	b.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, p.env.Base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.admin)
	req.Header.Set("X-Request-Id", requestID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r producttest.Response
	if err := json.Unmarshal(raw, &r); err != nil {
		b.Fatalf("answer is not JSON (%d): %s", resp.StatusCode, raw)
	}
	if len(r.Errors) > 0 {
		b.Fatalf("%s: %+v", strings.Join(strings.Fields(query), " "), r.Errors)
	}
	return r.Data
}

// dig walks nested JSON objects.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}
