package postgres

import "testing"

func TestFanoutReachesEveryFeed(t *testing.T) {
	var b fanout[int]
	s1, s2 := b.Subscribe(4), b.Subscribe(4)
	b.Publish(7)
	if v := <-s1.C; v != 7 {
		t.Fatalf("s1 got %d", v)
	}
	if v := <-s2.C; v != 7 {
		t.Fatalf("s2 got %d", v)
	}
	s1.Close()
	s1.Close()
	if _, open := <-s1.C; open {
		t.Fatal("closed subscription still open")
	}
	if b.Len() != 1 {
		t.Fatalf("Len = %d, want 1", b.Len())
	}
}

func TestFanoutDropsASlowFeedNotWaitedFor(t *testing.T) {
	var b fanout[int]
	slow, fast := b.Subscribe(1), b.Subscribe(3)
	b.Publish(1)
	b.Publish(2) // slow has no room: dropped
	b.Publish(3)
	if !slow.Dropped() {
		t.Fatal("slow subscriber not dropped")
	}
	if v, ok := <-slow.C; !ok || v != 1 {
		t.Fatalf("slow kept %d,%v; want the value it had room for", v, ok)
	}
	if _, ok := <-slow.C; ok {
		t.Fatal("dropped subscriber's channel not closed")
	}
	for want := 1; want <= 3; want++ {
		if v := <-fast.C; v != want {
			t.Fatalf("fast got %d, want %d", v, want)
		}
	}
	if fast.Dropped() {
		t.Fatal("fast subscriber dropped")
	}
}
