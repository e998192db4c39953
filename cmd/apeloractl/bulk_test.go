package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas/sim"
	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// A bulk commission of 50 discovered machines, two of them Deployed: the plan summarises
// the set, the typed count is required, each machine's result is printed as it arrives,
// and each machine's step is its own audited event under the one request id.
func TestBulkCommissionAgainstTheSimulator(t *testing.T) {
	lab := incuslab.Start(t, 1)
	var specs []sim.MachineSpec
	var names []string
	for i := range 50 {
		s := sim.MachineSpec{SystemID: fmt.Sprintf("bk%04d", i), Hostname: fmt.Sprintf("node-%02d", i), Status: 0, PowerType: "ipmi",
			HardwareUUID: fmt.Sprintf("4c4c4544-0042-3510-8052-b7c04f4e%04d", i)}
		if i == 10 || i == 20 {
			s.Status, s.Owner, s.PowerType = 6, "apelora", "manual" // Deployed: commissioning is refused
		}
		specs = append(specs, s)
		names = append(names, s.Hostname)
	}
	m := producttest.StartMAAS(t, sim.Fixture{Machines: specs})
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithMAAS(m.Config), producttest.WithStepConcurrency(4))
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", e.Identity("ops", identity.ManageInfrastructure))
	bulk := func(input string, args ...string) (string, error) {
		var out bytes.Buffer
		stdin = strings.NewReader(input)
		t.Cleanup(func() { stdin = os.Stdin })
		err := run(t.Context(), append([]string{"bulk"}, args...), &out)
		return out.String(), err
	}
	commissioned := func() int64 {
		return e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'commissionMachine' AND outcome = 'SUCCEEDED'`).(int64)
	}

	// The seeds' order: the discovered machines are registered first (a MAAS step needs a
	// record), in one bulk step of their own.
	if out, err := bulk("", append(append([]string{"register"}, names...), "-confirm", "50")...); err != nil {
		t.Fatalf("bulk register: %v\n%s", err, out)
	}

	// Names from standard input (with a repeat, which counts once); a dry run plans only.
	out, err := bulk(strings.Join(append(names, "node-01"), "\n"), "commission", "-dry-run", "-no-tests")
	if err == nil || !strings.Contains(out, "plan: commission for 50 machines: 48 would go ahead, 2 would be refused") ||
		!regexp.MustCompile(`2 refused FAILED_PRECONDITION: .*\n\s+node-10 node-20\n`).MatchString(out) {
		t.Fatalf("bulk -dry-run: %v\n%s", err, out)
	}
	if n := commissioned(); n != 0 {
		t.Fatalf("a dry run commissioned %d machines", n)
	}
	// Above 10 machines the count must be typed again; nothing runs without it.
	out, err = bulk("", append(append([]string{"commission"}, names...), "-no-tests", "-confirm", "49")...)
	if err == nil || !strings.Contains(err.Error(), "-confirm 50") || commissioned() != 0 {
		t.Fatalf("bulk without the typed count: %v\n%s", err, out)
	}

	out, err = bulk("", append(append([]string{"commission"}, names...), "-no-tests", "-confirm", "50")...)
	if err == nil || !strings.Contains(err.Error(), "2 of 50 machines were not done") {
		t.Fatalf("bulk commission: %v, want the two refused\n%s", err, out)
	}
	if got := len(regexp.MustCompile(`(?m)^done\tnode-\d\d$`).FindAllString(out, -1)); got != 48 {
		t.Errorf("%d machines done, want 48\n%s", got, out)
	}
	for _, n := range []string{"node-10", "node-20"} {
		if !regexp.MustCompile(`(?m)^refused\t` + n + `\tFAILED_PRECONDITION: .*Deployed`).MatchString(out) {
			t.Errorf("%s not reported refused with its reason\n%s", n, out)
		}
	}
	rid := regexp.MustCompile(`commission: 48 done, 2 refused, 0 failed \(request id (bulk-[0-9a-f]+)\)`).FindStringSubmatch(out)
	if rid == nil {
		t.Fatalf("no summary with the request id\n%s", out)
	}
	// One event per machine, all under the one request id: 48 SUCCEEDED, 2 FAILED with the reason.
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'commissionMachine' AND request_id = $1 AND outcome = 'SUCCEEDED'`, rid[1]).(int64); n != 48 {
		t.Errorf("%d commissionMachine events SUCCEEDED under %s, want 48", n, rid[1])
	}
	if n := e.Scalar(`SELECT count(*) FROM audit_events WHERE action = 'commissionMachine' AND request_id = $1 AND outcome <> 'SUCCEEDED' AND error LIKE '%Deployed%'`, rid[1]).(int64); n != 2 {
		t.Errorf("%d refused commissionMachine events under %s, want 2", n, rid[1])
	}
	if n := e.Scalar(`SELECT count(DISTINCT parameters->'input'->>'systemId') FROM audit_events WHERE request_id = $1`, rid[1]).(int64); n != 50 {
		t.Errorf("the events under %s name %d machines, want each of the 50 once", rid[1], n)
	}
	if n := m.Server.Requests(); countOps(n, "commission") != 48 {
		t.Errorf("MAAS got %d commission calls, want 48 (none for the refused)", countOps(n, "commission"))
	}

	// A failed machine can be retried with the command printed.
	m.Clock.Advance(time.Hour) // commissioning ends: Ready, so hardware tests may run
	// (The set is frozen and planned while MAAS answers; then it stops answering.)
	c := &cli{endpoint: e.Base + "/graphql", token: e.Identity("ops2", identity.ManageInfrastructure), out: io.Discard}
	c.gql = client.New(c.endpoint, c.token, nil)
	var runOut bytes.Buffer
	b := &bulkRun{step: "hardware-test", tests: []string{"smartctl-validate"}, concurrency: 2, out: &runOut, requestID: "bulk-retry-test"}
	b.gql = client.New(c.endpoint, c.token, &http.Client{Transport: withRequestID{id: b.requestID, next: http.DefaultTransport}})
	if err := b.resolve(t.Context(), c.gql, []string{"node-01", "node-02"}); err != nil {
		t.Fatal(err)
	}
	m.Server.SetFault(sim.FaultUnavailable)
	err = b.finish(b.runAll(t.Context(), b.targets, false, b.report))
	out = runOut.String()
	retry := regexp.MustCompile(`retry the failed: apeloractl bulk hardware-test (node-01 node-02|node-02 node-01)\n`).FindStringSubmatch(out)
	if err == nil || retry == nil || !regexp.MustCompile(`(?m)^failed\tnode-01\tUNAVAILABLE: `).MatchString(out) {
		t.Fatalf("bulk with MAAS unavailable: %v\n%s", err, out)
	}
	// While MAAS does not answer, no set is frozen at all.
	if out, err := bulk("node-03", "commission"); err == nil || !strings.Contains(err.Error(), "UNAVAILABLE: MAAS did not answer") {
		t.Fatalf("bulk while MAAS is down: %v\n%s", err, out)
	}
	m.Server.SetFault(sim.FaultNone)
	// The API's fleet read says MAAS is not answering until its next read succeeds; the
	// administrator tries again, as the message says.
	out2, err2 := bulk("", append([]string{"hardware-test"}, append(strings.Fields(retry[1]), "-tests", "smartctl-validate")...)...)
	for deadline := time.Now().Add(30 * time.Second); err2 != nil && strings.Contains(err2.Error(), "MAAS did not answer") && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		out2, err2 = bulk("", append([]string{"hardware-test"}, append(strings.Fields(retry[1]), "-tests", "smartctl-validate")...)...)
	}
	if err2 != nil || !strings.Contains(out2, "hardware-test: 2 done, 0 refused, 0 failed") {
		t.Fatalf("retry of the failed: %v\n%s", err2, out2)
	}
}

func countOps(reqs []sim.Request, op string) int {
	n := 0
	for _, r := range reqs {
		if r.Method == "POST" && r.Op == op {
			n++
		}
	}
	return n
}

// refusedCode and the console's outcomeOfCode are one rule written twice: both are fed
// the same cases, and the cases cover every code the API answers with.
func TestRefusedOrFailedAsTheConsoleSays(t *testing.T) {
	data, err := os.ReadFile("../../web/console/src/lib/bulk-outcomes.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string]string
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range apperr.Codes {
		want, ok := cases[string(c)]
		if !ok {
			t.Errorf("bulk-outcomes.json does not say whether %s is refused or failed", c)
			continue
		}
		if got := refusedCode(string(c)); got != (want == "refused") {
			t.Errorf("refusedCode(%s) = %v, the console says %s", c, got, want)
		}
	}
}
