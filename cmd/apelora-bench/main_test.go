package main

import (
	"io"
	"math"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond, 0: time.Millisecond} {
		if got := percentile(ds, q); got != want {
			t.Errorf("percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("no samples: %v", got)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile sorted its argument")
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tapelora\nVmPeak:\t 1000 kB\nVmRSS:\t   12345 kB\nThreads:\t9\n"
	got, err := parseVmRSS(strings.NewReader(status))
	if err != nil || got != 12345*1024 {
		t.Fatalf("parseVmRSS = %d, %v", got, err)
	}
	if _, err := parseVmRSS(strings.NewReader("Name:\tzombie\n")); err == nil {
		t.Fatal("no VmRSS line: want an error")
	}
}

func TestGCTraceLines(t *testing.T) {
	log := `{"level":"INFO","msg":"apelora serving"}
gc 1 @0.012s 3%: 0.010+1.2+0.003 ms clock, 0.020+0.1/0.5/0.9+0.006 ms cpu, 3->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 17 @12.345s 1%: 0.044+6.1+0.029 ms clock, 0.088+1.0/3.0/0.1+0.058 ms cpu, 70->71->37 MB, 74 MB goal, 8 MB stacks, 1 MB globals, 2 P (forced)
`
	got := gcLines(log)
	if len(got) != 2 {
		t.Fatalf("%d lines: %+v", len(got), got)
	}
	want := gcLine{N: 17, HeapStart: 70, HeapEnd: 71, Live: 37, Goal: 74, Stacks: 8, Globals: 1}
	if got[1] != want {
		t.Fatalf("got %+v, want %+v", got[1], want)
	}
}

func TestParseStatCPU(t *testing.T) {
	// pid (comm with a space) state ppid … utime stime …
	stat := "4242 (apelora serve) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 75 0 0 20 0 9 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3250*time.Millisecond {
		t.Fatalf("parseStatCPU = %v, %v", got, err)
	}
}

func TestFlags(t *testing.T) {
	for _, bad := range [][]string{
		{"-subscribers", "0"},
		{"-attach", "http://127.0.0.1:8080"},               // no token
		{"-attach", "http://10.0.0.5:8080", "-token", "t"}, // not loopback
		{"-pid", "12"},                                     // only with -attach
		{"extra"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	o, err := parseFlags([]string{"-attach", "http://127.0.0.1:8080/graphql", "-token", "t", "-pid", "12"}, io.Discard)
	if err != nil || o.attach != "http://127.0.0.1:8080" || o.subscribers != 1000 {
		t.Fatalf("%+v, %v", o, err)
	}
}

func TestHistogramQuantile(t *testing.T) {
	before := &metrics.Float64Histogram{Counts: []uint64{0, 0, 0}, Buckets: []float64{0, 0.001, 0.01, math.Inf(1)}}
	after := &metrics.Float64Histogram{Counts: []uint64{90, 9, 1}, Buckets: before.Buckets}
	if got := histogramQuantile(before, after, 0.5); got != time.Millisecond {
		t.Errorf("p50 = %v", got)
	}
	if got := histogramQuantile(before, after, 0.99); got != 10*time.Millisecond {
		t.Errorf("p99 = %v", got)
	}
	if got := histogramQuantile(before, after, 1); got != 10*time.Millisecond {
		t.Errorf("max = %v (the unbounded bucket reports its lower bound)", got)
	}
	if got := histogramQuantile(after, after, 0.5); got != -1 {
		t.Errorf("no samples: %v", got)
	}
}
