// Package bench holds Go benchmarks that need the whole product: a real PostgreSQL
// (APELORA_TEST_DATABASE_URL) and real Incus members on loopback (testkit/incuslab).
// It has no tests, so `go test ./...` passes through it at once; run the benchmarks with
//
//	go test ./bench -run '^$' -bench . -benchtime 20x
//
// They skip loudly without incusd or PostgreSQL, as the end-to-end tests do. The
// websocket delivery and memory measurement is a command, cmd/apelora-bench, because it
// needs the server as a separate process.
package bench
