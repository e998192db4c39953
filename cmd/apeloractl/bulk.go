package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Khan/genqlient/graphql"

	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/internal/apperr"
)

// A bulk step runs one step for a set of machines. The set is frozen to machine names
// when the command starts (never re-filtered by the server): each machine's step is its
// own mutation call, so its own audited event, and every call carries one request id
// (X-Request-Id, which the server keeps) that links the events. The server bounds how
// many machine steps run at once against MAAS and Incus (APELORA_STEP_CONCURRENCY), so
// -concurrency only bounds what apeloractl keeps in flight. Approve enrolment is not a
// bulk step: its join token is shown once, to one person, for one machine.

// bulkSteps are the steps a bulk step may run (the one-machine command of each name).
// A new step (evacuate, restore) is a line here and a case in bulkRun.call.
var bulkSteps = []string{"register", "commission", "hardware-test", "install", "admit", "release"}

// bulkConfirmAbove is the set size above which the count must be typed again (-confirm N).
const bulkConfirmAbove = 10

// bulkTarget is one machine of the frozen set, with what its step is called with.
type bulkTarget struct {
	name, systemID, hostname string
	// planHash is the hash of this machine's plan as shown: its call confirms that plan and
	// no other (PLAN_CHANGED, nothing changed, when the machine changed in between).
	planHash string
	// refusal is why apeloractl cannot even ask (no such machine, no MAAS machine).
	refusal *codedMessage
}

// The outcomes of one machine's step.
const (
	outcomeDone    = "done"
	outcomeRefused = "refused" // the server said no; nothing changed
	outcomeFailed  = "failed"  // it was tried and did not complete; may be retried
	outcomeAhead   = "would go ahead"
)

type bulkResult struct {
	Machine string `json:"machine"`
	Outcome string `json:"outcome"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// planHash is the dry run's plan hash (the plan shown for the machine).
	planHash string
}

type bulkRun struct {
	step                    string
	tests                   []string
	series, comment         string
	cluster                 string
	erase                   bool
	concurrency             int
	requestID, planID       string
	gql, planGQL            graphql.Client
	targets                 []bulkTarget
	out                     io.Writer
	outMu                   sync.Mutex
	json                    bool
	retryCommand, stepLabel string
}

// bulkUse is bulk's usage line, with the flags of every step.
const bulkUse = "apeloractl bulk STEP [NAME ...] [-tests a,b | -no-tests] [-series S] [-cluster NAME] [-erase] [-comment TEXT] [-concurrency N] [-confirm N]\n  STEP: " +
	"register, commission, hardware-test, install, admit, release; names from the arguments, or from standard input when none are given (or -)"

var bulkCommand = &command{
	name: "bulk", synopsis: "STEP [NAME ...] [-confirm N] [-concurrency N] [STEP'S FLAGS]", use: bulkUse,
	doc: "one step for a set of machines, each its own audited call,\nall under one request id: register (discovered),\n" +
		"commission, hardware-test, install, admit, release; names\nfrom the arguments, else from standard input. Prints the\n" +
		"plan for the set (how many would go ahead, the refusals\ngrouped by reason), then each machine's result as it\n" +
		"arrives (done, refused, failed) and how to retry the\nfailed. Above 10 machines, -confirm repeats the count.",
	names: 1, more: -1, plans: true,
	flags: func(fs *flag.FlagSet) runner {
		b := &bulkRun{}
		tests := fs.String("tests", "", "comma-separated testing scripts or tags (at most 16)")
		noTests := fs.Bool("no-tests", false, "commission without tests")
		fs.StringVar(&b.series, "series", "", "the series to install, e.g. noble")
		fs.StringVar(&b.cluster, "cluster", "", "the cluster the machines join (install; a name 'apeloractl clusters' lists); default: each record's")
		fs.BoolVar(&b.erase, "erase", false, "erase the disks on release (needs hardware.delete)")
		fs.StringVar(&b.comment, "comment", "", "a comment for MAAS (release)")
		fs.IntVar(&b.concurrency, "concurrency", 8, "steps apeloractl keeps in flight (the server bounds them too)")
		confirm := fs.Int("confirm", 0, fmt.Sprintf("the number of machines, typed again (needed above %d)", bulkConfirmAbove))
		return func(c *cli, ctx context.Context, names []string) error {
			b.tests = testList(*tests)
			if *noTests {
				b.tests = []string{}
			}
			return c.bulk(ctx, b, names[0], names[1:], *confirm, stdin)
		}
	},
}

func (c *cli) bulk(ctx context.Context, b *bulkRun, step string, names []string, confirm int, stdin io.Reader) error {
	if !slices.Contains(bulkSteps, step) {
		return usageError(bulkUse)
	}
	b.step, b.out, b.json = step, c.out, c.json
	if b.concurrency < 1 {
		b.concurrency = 1
	}
	if len(names) == 0 || (len(names) == 1 && names[0] == "-") {
		var err error
		if names, err = readNames(stdin); err != nil {
			return err
		}
	}
	names = frozen(names)
	if len(names) == 0 {
		return usageError("no machine names given: " + bulkUse)
	}
	if err := b.resolve(ctx, c.gql, names); err != nil {
		return err
	}
	b.requestID, b.planID = bulkRequestID(), bulkRequestID()
	b.gql = client.New(c.endpoint, c.token, &http.Client{Timeout: 5 * time.Minute, Transport: withRequestID{id: b.requestID, next: http.DefaultTransport}})
	b.planGQL = client.New(c.endpoint, c.token, &http.Client{Timeout: 5 * time.Minute, Transport: withRequestID{id: b.planID, next: http.DefaultTransport}})

	// The plan for the set: every machine's dry run, summarised.
	planned := b.runAll(ctx, b.targets, true, nil)
	ahead := b.summarise(planned)
	if c.dryRun {
		if ahead < len(planned) {
			return &apiError{errs: []codedMessage{{"FAILED_PRECONDITION", fmt.Sprintf("%d of %d machines would be refused", len(planned)-ahead, len(planned))}}}
		}
		return nil
	}
	if len(b.targets) > bulkConfirmAbove && confirm != len(b.targets) {
		return usageError(fmt.Sprintf("this step is for %d machines: type the count again with -confirm %d", len(b.targets), len(b.targets)))
	}
	b.confirmShown(planned)
	results := b.runAll(ctx, b.targets, false, b.report)
	return b.finish(results)
}

// confirmShown gives each machine's call the hash of the plan shown for it, as the
// console's bulk dialog does: a machine whose plan changed since is refused PLAN_CHANGED,
// nothing changed, and the rest go ahead.
func (b *bulkRun) confirmShown(planned []bulkResult) {
	for i := range b.targets {
		b.targets[i].planHash = planned[i].planHash
	}
}

// readNames reads whitespace-separated names (one a line, say, from `apeloractl fleet`).
func readNames(r io.Reader) ([]string, error) {
	var names []string
	s := bufio.NewScanner(r)
	s.Split(bufio.ScanWords)
	for s.Scan() {
		names = append(names, s.Text())
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read machine names from standard input: %w", err)
	}
	return names, nil
}

// frozen is the set as given, each name once, in the order given.
func frozen(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func bulkRequestID() string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return "bulk-" + hex.EncodeToString(b[:])
}

// withRequestID sends every request of a bulk step with its one request id.
type withRequestID struct {
	id   string
	next http.RoundTripper
}

func (w withRequestID) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Request-Id", w.id)
	return w.next.RoundTrip(r)
}

// resolve reads the fleet once and freezes each name to what its step is called with.
func (b *bulkRun) resolve(ctx context.Context, gql graphql.Client, names []string) error {
	r, err := client.Fleet(ctx, gql)
	if err != nil {
		return err
	}
	needsMAAS := b.step != "admit"
	if src := r.Fleet.Sources.Maas; needsMAAS && !src.Available {
		// Without MAAS's list a discovered machine would look unknown: freeze no set.
		return &apiError{errs: []codedMessage{{"UNAVAILABLE", "MAAS did not answer the fleet read, so the machines' system ids are unknown; nothing was done: try again (" + src.Message + ")"}}}
	}
	rows := map[string]*client.FleetFleetMachinesMachine{}
	for i := range r.Fleet.Machines {
		rows[r.Fleet.Machines[i].Name] = &r.Fleet.Machines[i]
	}
	for _, n := range names {
		t := bulkTarget{name: n}
		switch m := rows[n]; {
		case m == nil:
			t.refusal = &codedMessage{"NOT_FOUND", fmt.Sprintf("no machine named %q in the fleet", n)}
		case m.Maas != nil:
			t.systemID, t.hostname = m.Maas.SystemId, m.Maas.Hostname
		case needsMAAS:
			t.refusal = &codedMessage{"FAILED_PRECONDITION", fmt.Sprintf("%s is not a MAAS machine: %s is a MAAS step", n, b.step)}
		}
		b.targets = append(b.targets, t)
	}
	return nil
}

// runAll runs the step (or its dry run) for every target, at most b.concurrency at once,
// calling each (when not nil) with each machine's result as it arrives. The results are
// in the targets' order.
func (b *bulkRun) runAll(ctx context.Context, targets []bulkTarget, dry bool, each func(bulkResult)) []bulkResult {
	results := make([]bulkResult, len(targets))
	sem := make(chan struct{}, b.concurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = b.one(ctx, t, dry)
			if each != nil {
				each(results[i])
			}
		}()
	}
	wg.Wait()
	return results
}

func (b *bulkRun) one(ctx context.Context, t bulkTarget, dry bool) bulkResult {
	res := bulkResult{Machine: t.name}
	if t.refusal != nil {
		res.Outcome, res.Code, res.Message = outcomeRefused, t.refusal.code, t.refusal.message
		return res
	}
	if ctx.Err() != nil {
		res.Outcome, res.Code, res.Message = outcomeFailed, "UNAVAILABLE", "not sent: apeloractl was interrupted"
		return res
	}
	p, err := b.call(ctx, t, dry)
	if err = explain(baseURL(), err); err != nil {
		code, msg := "UNAVAILABLE", err.Error()
		if api, ok := err.(*apiError); ok && len(api.errs) > 0 {
			code, msg = api.errs[0].code, api.errs[0].message
		}
		res.Outcome, res.Code, res.Message = outcomeFailed, code, msg
		if refusedCode(code) {
			res.Outcome = outcomeRefused
		}
		return res
	}
	if dry {
		if p != nil {
			res.planHash = p.GetPlanHash()
		}
		if p != nil && p.GetRefused() && len(p.GetRefusals()) > 0 {
			r := p.GetRefusals()[0]
			res.Outcome, res.Code, res.Message = outcomeRefused, str(r.Code), r.Message
			return res
		}
		res.Outcome = outcomeAhead
		return res
	}
	res.Outcome = outcomeDone
	return res
}

// refusedCode: the server said no before changing anything (a failure is the rest: the
// step was tried and did not complete). The one rule: apperr.Refusal, from
// bulk-outcomes.json, which the console reads too.
func refusedCode(code string) bool { return apperr.Refusal(apperr.Code(code)) }

// call makes the one machine's mutation: the same one its one-machine command makes.
func (b *bulkRun) call(ctx context.Context, t bulkTarget, dry bool) (planView, error) {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	gql, planHash := b.gql, opt(t.planHash)
	var dryRun *bool
	if dry {
		gql, dryRun, planHash = b.planGQL, &dry, nil
	}
	switch b.step {
	case "register":
		r, err := client.RegisterMachine(ctx, gql, client.RegisterMachineInput{Name: t.name, Provisioner: client.ProvisionerKindMaas, MaasSystemId: &t.systemID, DryRun: dryRun, PlanHash: planHash})
		return r.GetRegisterMachine().Plan, err
	case "commission":
		r, err := client.CommissionMachine(ctx, gql, client.CommissionMachineInput{SystemId: t.systemID, Tests: b.tests, DryRun: dryRun, PlanHash: planHash})
		return r.GetCommissionMachine().Plan, err
	case "hardware-test":
		// The hostname is the one the frozen set resolved: the typed count confirms the set.
		r, err := client.RunHardwareTests(ctx, gql, client.RunHardwareTestsInput{SystemId: t.systemID, Hostname: t.hostname, Tests: b.tests, DryRun: dryRun, PlanHash: planHash})
		return r.GetRunHardwareTests().Plan, err
	case "install":
		r, err := client.InstallOperatingSystem(ctx, gql, client.InstallOperatingSystemInput{Name: t.name, Series: b.series, Cluster: opt(b.cluster), DryRun: dryRun, PlanHash: planHash})
		return r.GetInstallOperatingSystem().Plan, err
	case "admit":
		r, err := client.AdmitMember(ctx, gql, client.AdmitMemberInput{Name: t.name, DryRun: dryRun, PlanHash: planHash})
		return r.GetAdmitMember().Plan, err
	case "release":
		r, err := client.ReleaseMachine(ctx, gql, client.ReleaseMachineInput{SystemId: t.systemID, Erase: &b.erase, Comment: opt(b.comment), DryRun: dryRun, PlanHash: planHash})
		return r.GetReleaseMachine().Plan, err
	}
	return nil, fmt.Errorf("bulk step %q has no call", b.step)
}

// summarise prints the plan for the set: how many would go ahead, and the refusals grouped
// by reason (the machine's own name taken out, so one reason is one group). It returns how
// many would go ahead.
func (b *bulkRun) summarise(planned []bulkResult) int {
	type group struct {
		code, reason string
		machines     []string
	}
	var groups []*group
	ahead := 0
	for i, r := range planned {
		if r.Outcome == outcomeAhead {
			ahead++
			continue
		}
		reason := reasonOf(r.Message, b.targets[i])
		j := slices.IndexFunc(groups, func(g *group) bool { return g.code == r.Code && g.reason == reason })
		if j < 0 {
			groups = append(groups, &group{code: r.Code, reason: reason})
			j = len(groups) - 1
		}
		groups[j].machines = append(groups[j].machines, r.Machine)
	}
	if b.json {
		for _, r := range planned {
			_ = json.NewEncoder(b.out).Encode(r)
		}
		return ahead
	}
	fmt.Fprintf(b.out, "plan: %s for %d machines: %d would go ahead, %d would be refused (plan request id %s)\n", b.step, len(planned), ahead, len(planned)-ahead, b.planID)
	for _, g := range groups {
		fmt.Fprintf(b.out, "  %d refused %s: %s\n    %s\n", len(g.machines), g.code, g.reason, listNames(g.machines, 10))
	}
	return ahead
}

// reasonOf is a refusal with the machine's own name, system id and hostname taken out.
func reasonOf(msg string, t bulkTarget) string {
	for _, s := range []string{t.name, t.systemID, t.hostname} {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "…")
		}
	}
	return msg
}

func listNames(names []string, most int) string {
	if len(names) <= most {
		return strings.Join(names, " ")
	}
	return strings.Join(names[:most], " ") + fmt.Sprintf(" and %d more", len(names)-most)
}

// report prints one machine's result as it arrives.
func (b *bulkRun) report(r bulkResult) {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if b.json {
		_ = json.NewEncoder(b.out).Encode(r)
		return
	}
	if r.Code == "" {
		fmt.Fprintf(b.out, "%s\t%s\n", r.Outcome, r.Machine)
		return
	}
	fmt.Fprintf(b.out, "%s\t%s\t%s: %s\n", r.Outcome, r.Machine, r.Code, r.Message)
}

// finish prints the counts and how to retry the failed; any machine not done makes the
// exit status 1.
func (b *bulkRun) finish(results []bulkResult) error {
	var failed []string
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Outcome]++
		if r.Outcome == outcomeFailed {
			failed = append(failed, r.Machine)
		}
	}
	if !b.json {
		fmt.Fprintf(b.out, "%s: %d done, %d refused, %d failed (request id %s)\n", b.step, counts[outcomeDone], counts[outcomeRefused], counts[outcomeFailed], b.requestID)
		if len(failed) > 0 {
			fmt.Fprintf(b.out, "retry the failed: apeloractl bulk %s %s\n", b.step, strings.Join(failed, " "))
		}
	}
	if n := counts[outcomeRefused] + counts[outcomeFailed]; n > 0 {
		return &apiError{errs: []codedMessage{{"FAILED_PRECONDITION", fmt.Sprintf("%d of %d machines were not done (request id %s)", n, len(results), b.requestID)}}}
	}
	return nil
}

// stdin is where bulk reads names when none are given; a variable so tests can feed it.
var stdin io.Reader = os.Stdin
