package incus

import "time"

// SetEventPing sets the event streams' keep-alive period until the returned function
// restores it.
func SetEventPing(d time.Duration) (restore func()) {
	old := eventPing
	eventPing = d
	return func() { eventPing = old }
}
