package incus

import (
	"slices"
	"testing"
)

// The order a call tries addresses in: the one that answered last, the other members from
// the next one on, then the configured addresses that are no members.
func TestEndpointsOrder(t *testing.T) {
	e := newEndpoints([]string{"https://seed:8443"})
	if got := e.order(); !slices.Equal(got, []string{"https://seed:8443"}) {
		t.Fatalf("before learning: %v", got)
	}
	// Learned at other addresses than the seed's: the seed stays first while it answers.
	if moved := e.learn([]string{"https://m2:8443/", "https://m1:8443", "https://m3:8443"}); moved {
		t.Fatal("a configured address that answers was moved off")
	}
	if got := e.order(); !slices.Equal(got, []string{"https://seed:8443", "https://m1:8443", "https://m2:8443", "https://m3:8443"}) {
		t.Fatalf("after learning: %v", got)
	}
	e.failed("https://seed:8443")
	e.answered("https://m2:8443")
	if got := e.order(); !slices.Equal(got, []string{"https://m2:8443", "https://m3:8443", "https://m1:8443", "https://seed:8443"}) {
		t.Fatalf("after m2 answered: %v", got)
	}
	e.failed("https://m2:8443")
	if got := e.through(); got != "https://m3:8443" {
		t.Fatalf("after m2 failed: %s", got)
	}
	// m3 leaves the cluster: the next member list moves the client off it.
	if moved := e.learn([]string{"https://m1:8443", "https://m2:8443"}); !moved || e.through() != "https://m1:8443" {
		t.Fatalf("after m3 left: moved %v, through %s", moved, e.through())
	}
	e.avoid("https://m1:8443")
	if e.through() == "https://m1:8443" {
		t.Fatal("avoid kept the member")
	}
	if connectBound(9e9, true) != 3e9 || connectBound(9e9, false) != 9e9 || connectBound(1e9, true) != 1e9 {
		t.Fatal("connect bound")
	}
}
