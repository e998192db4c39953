package bench

import (
	"fmt"
	"sync"
	"testing"

	"github.com/apelora/fabric/testkit/incuslab"
)

// BenchmarkEvacuationPlanIncusCalls: an evacuation's plan costs a constant number of Incus
// calls whatever the instance count. A real 2-member cluster whose first member holds 5,
// then 500 empty instances; each operation is a dry run of evacuateMember (every read the
// real call makes, its POST recorded, not sent), counted per request id as
// BenchmarkIncusCallsPerOperation counts them, reported as incus-calls/op.
func BenchmarkEvacuationPlanIncusCalls(b *testing.B) {
	p := startProduct(b, 2)
	first := p.lab.Members[0]
	if out, err := p.lab.CLI(first, "profile", "device", "add", "default", "root", "disk", "path=/", "pool="+incuslab.Pool); err != nil {
		b.Fatalf("root disk: %v: %s", err, out)
	}
	// The second member carries the admission mark, so the plan has a target.
	if out, err := p.lab.CLI(first, "cluster", "set", p.target, "user.apelora.admission", "bench"); err != nil {
		b.Fatalf("mark %s: %v: %s", p.target, err, out)
	}
	client := p.lab.Client(b, first)
	created := 0
	perSize := map[int]float64{}
	for _, n := range []int{5, 500} {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 8)
		for i := created; i < n; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func(i int) {
				defer wg.Done()
				defer func() { <-sem }()
				if _, err := client.CreateEmptyInstance(b.Context(), fmt.Sprintf("e%d", i), first.Name, incuslab.Pool); err != nil {
					errs <- err
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		created = n
		op := operation{name: fmt.Sprintf("evacuateMember-plan-%d", n), run: func(b *testing.B, p *product, id string) {
			r := p.gql(b, id, `mutation($n: String!) { evacuateMember(input: {name: $n, dryRun: true}) { instances { name } plan { refused refusals { message } } } }`,
				map[string]any{"n": first.Name})
			if got := len(dig(r, "evacuateMember", "instances").([]any)); got != n || dig(r, "evacuateMember", "plan", "refused") != false {
				b.Fatalf("plan with %d instances: %d listed: %v", n, got, dig(r, "evacuateMember", "plan"))
			}
		}}
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) { perSize[n] = p.measure(b, op) })
	}
	if perSize[5] != perSize[500] {
		b.Errorf("an evacuation plan costs %.2f Incus calls with 5 instances but %.2f with 500: the calls must not grow with the instances", perSize[5], perSize[500])
	}
}
