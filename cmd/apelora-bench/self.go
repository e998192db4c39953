package main

import (
	"runtime/metrics"
	"time"
)

// schedLatencyMetric is how long goroutines waited to run once runnable. The bench's own
// readers wait like this when the bench lacks CPU: if they waited long, the delivery
// times it reports would be its own, not the server's.
const schedLatencyMetric = "/sched/latencies:seconds"

// schedLatencies returns the bench's scheduling-latency histogram so far.
func schedLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencyMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// histogramQuantile returns the q-quantile of the samples added between before and after
// (upper bucket bounds), or -1 when there are none.
func histogramQuantile(before, after *metrics.Float64Histogram, q float64) time.Duration {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return -1
	}
	var total uint64
	diff := make([]uint64, len(after.Counts))
	for i := range diff {
		diff[i] = after.Counts[i] - before.Counts[i]
		total += diff[i]
	}
	if total == 0 {
		return -1
	}
	want := uint64(q*float64(total) + 0.999999999)
	var seen uint64
	for i, n := range diff {
		seen += n
		if seen >= max(want, 1) {
			upper := after.Buckets[i+1]
			if upper > 3600 { // the last bucket is unbounded
				upper = after.Buckets[i]
			}
			return time.Duration(upper * float64(time.Second))
		}
	}
	return -1
}
