package incus_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/testkit/incuslab"
)

// TestClusterThroughAnyMember: a client given one member's URL learns the others from the
// cluster's member list, every connection pinned to the cluster certificate, and goes on
// to the next member when one is dead (refuses), hung (accepts and never answers) or has
// left the cluster (presents a certificate of its own, seen live on 6.0.4 after an
// unforced removal).
func TestClusterThroughAnyMember(t *testing.T) {
	lab := incuslab.Start(t, 5)
	ctx := ctxFor(t)
	// Members to break are stand-bys (no vote): killing or freezing a voter, the leader
	// above all, stalls every member's database for seconds, which is Incus's own matter.
	var spare []*incuslab.Member
	for _, m := range must(lab.Client(t, lab.Members[0]).Members(ctx))(t) {
		if !slices.Contains(m.Roles, "database") && !slices.Contains(m.Roles, "database-leader") {
			spare = append(spare, lab.Member(m.ServerName))
		}
	}
	if len(spare) < 2 {
		t.Fatalf("want two members without a vote, got %v", spare)
	}
	dead, hung := spare[0], spare[1]
	client := func(seed string, more ...string) *incus.Client {
		t.Helper()
		cfg := lab.ConfigFor(lab.Members[0])
		cfg.URL, cfg.FallbackURLs, cfg.Timeout = seed, more, 6*time.Second
		cl, err := incus.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	names := func(cl *incus.Client) []string {
		t.Helper()
		ms, err := cl.Members(ctx)
		if err != nil {
			t.Fatalf("members through %s: %v", cl.Through(), err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.ServerName)
		}
		return out
	}

	// Learned from the cluster: every member's URL.
	cl := client(dead.URL())
	names(cl)
	var want []string
	for _, m := range lab.Members {
		want = append(want, m.URL())
	}
	if got := cl.Addresses(); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("learned %v, want %v", got, want)
	}
	if cl.Through() != dead.URL() {
		t.Fatalf("talks through %s, want %s", cl.Through(), dead.URL())
	}

	// The member talked through dead (refuses): the next member answers, and is asked first
	// from then on.
	if err := lab.Kill(dead); err != nil {
		t.Fatal(err)
	}
	if got := names(cl); len(got) != 5 {
		t.Fatalf("members with %s dead: %v", dead.Name, got)
	}
	if cl.Through() == dead.URL() {
		t.Fatalf("still talking through the dead %s", dead.Name)
	}

	// The member talked through hung (accepts, never answers; its pooled connection too):
	// a read still answers within one call's bound.
	ch := client(hung.URL())
	names(ch)
	if err := lab.Freeze(hung); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := ch.ServerInfo(ctx, ""); err != nil {
		t.Fatalf("server info with %s hung: %v", hung.Name, err)
	}
	t.Logf("a read with the member talked through (%s) hung answered through %s in %v (call bound 6s)",
		hung.Name, ch.Through(), time.Since(began).Round(time.Millisecond))
	if ch.Through() == hung.URL() {
		t.Fatalf("still talking through the hung %s", hung.Name)
	}
	if err := lab.Thaw(hung); err != nil {
		t.Fatal(err)
	}

	// A client that starts with its one address dead has nobody to ask, and says where it
	// tried; given a second address (APELORA_INCUS_URL's list), it goes on there, writes
	// included: the connection never opened, so nothing was sent.
	if _, err := client(dead.URL()).Members(ctx); err == nil || !strings.Contains(err.Error(), dead.URL()) {
		t.Fatalf("only a dead address: %v", err)
	}
	seeded := client(dead.URL(), hung.URL())
	target := lab.Members[0].Name
	m, etag, err := seeded.Member(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	put := m.Put()
	put.Description = "through any member"
	if err := seeded.UpdateMember(ctx, target, put, etag); err != nil {
		t.Fatalf("a write with the first address dead: %v", err)
	}
	if m, _, _ := cl.Member(ctx, target); m.Description != "through any member" {
		t.Fatalf("the write did not land: %+v", m)
	}

	// The member talked through leaves the cluster (removed through itself, unforced): the
	// next call goes to another member, whose certificate is still the cluster's.
	leaving := client(hung.URL())
	names(leaving)
	if err := leaving.DeleteMember(ctx, hung.Name, false); err != nil {
		t.Fatalf("remove %s through itself: %v", hung.Name, err)
	}
	got := names(leaving)
	if slices.Contains(got, hung.Name) || leaving.Through() == hung.URL() {
		t.Fatalf("after removing %s: members %v, through %s", hung.Name, got, leaving.Through())
	}
	if slices.Contains(leaving.Addresses(), hung.URL()) {
		t.Fatalf("the removed member's address is still known: %v", leaving.Addresses())
	}
	// Another call after it, on a fresh connection: the removed daemon presents a
	// certificate of its own now, which the pin refuses.
	leaving.Close()
	if _, err := leaving.ServerInfo(ctx, ""); err != nil {
		t.Fatalf("after the removal: %v", err)
	}
}

// memberName is the lab member whose URL is u.
func memberName(lab *incuslab.Cluster, u string) string {
	for _, m := range lab.Members {
		if m.URL() == u {
			return m.Name
		}
	}
	return ""
}

// TestAMemberBackFromARestart: a member's own API (AskMember, at its URL) and reads
// forwarded to it through another member (?target=) are two facts: while it is down both
// fail (forwarded reads answer "Unable to connect", "Missing event connection with target
// cluster member" or "Server isn't ready yet" on 6.0.4); once restarted it answers itself,
// and forwarded reads follow when the other members reach it again. Logged: how long after.
func TestAMemberBackFromARestart(t *testing.T) {
	lab := incuslab.Start(t, 3)
	ctx := ctxFor(t)
	cl := lab.Client(t, lab.Members[0])
	m3 := lab.Members[2]
	if err := lab.Kill(m3); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AskMember(ctx, m3.URL()); err == nil {
		t.Fatal("a dead member answered itself")
	}
	if _, err := cl.ServerInfo(ctx, m3.Name); err == nil {
		t.Fatal("a dead member answered through the cluster")
	} else {
		t.Logf("forwarded to the dead m3: %v (not ready: %v)", err, incus.IsNotReady(err))
	}
	if err := lab.RestartMember(m3); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := cl.AskMember(ctx, m3.URL()); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the restarted m3 does not answer itself: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	itself := time.Now()
	var last error
	for {
		_, err := cl.ServerInfo(ctx, m3.Name)
		if err == nil {
			break
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("m3 answers itself, never through the cluster: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the restarted m3 answered through the cluster %v after it answered itself (last refusal meanwhile: %v)",
		time.Since(itself).Round(time.Millisecond), last)
}
