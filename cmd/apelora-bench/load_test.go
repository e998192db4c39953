package main

import (
	"github.com/apelora/fabric/domain/admission"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// The bench's own graphql-transport-ws client against the real product: it subscribes,
// keeps its subscribers alive through the server's pings, and records each subscriber's
// verdict. A few subscribers only; the thousand are the command's job.
func TestLoadSubscribesAnswersPingsAndRecordsVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an Incus lab")
	}
	lab := incuslab.Start(t, 1)
	e := producttest.Start(t, producttest.WithIncus(lab.Config), producttest.WithPingInterval(200*time.Millisecond))
	token := e.Identity("bench", identity.ViewInfrastructure)

	if err := newLoad(e.Base, "not-a-token", "m1").connect(t.Context(), 1, 1); err == nil || !strings.Contains(err.Error(), "4403") {
		t.Fatalf("with a bad token: %v, want the 4403 refusal", err)
	}

	const n = 5
	l := newLoad(e.Base, token, lab.Members[0].Name)
	if err := l.connect(t.Context(), n, 2); err != nil {
		t.Fatal(err)
	}
	defer l.close()
	// A subscriber that missed pongs would be cut off after two ping periods.
	time.Sleep(700 * time.Millisecond)
	run, sent, err := l.trigger(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := l.wait(t.Context(), run, n, 15*time.Second)
	if len(got) != n || l.Live() != n {
		t.Fatalf("%d of %d subscribers got run %s (live %d); failures %v", len(got), n, run, l.Live(), l.Failures())
	}
	for _, d := range got {
		if d.at.Before(sent) || d.recv.Before(d.at) {
			t.Errorf("subscriber %d: sent %v, at %v, received %v", d.sub, sent, d.at, d.recv)
		}
	}
	if c, per := l.checks.Load(), int64(len(admission.CheckNames)); c != per*int64(n) {
		t.Errorf("%d check results, want %d per subscriber (every check)", c, per)
	}
	if f := l.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
}

func TestQuickVerdictReadsWhatTheDecoderWould(t *testing.T) {
	msg := []byte(`{"id":"1","type":"next","payload":{"data":{"admissionChecks":{"runId":"r-42","at":"2026-01-02T03:04:05.123456Z","checks":[{"name":"a","result":"PASS"}],"verdict":"PASS"}}}}`)
	v, ok := quickVerdict(msg)
	if !ok || v.run != "r-42" || !v.at.Equal(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)) {
		t.Fatalf("%+v %v", v, ok)
	}
	for _, bad := range []string{
		`{"id":"1","type":"next","payload":{"data":{"admissionChecks":{"runId":"r","at":"x","verdict":"PASS"}}}}`,
		`{"id":"1","type":"next","payload":{"errors":[{"message":"m"}],"data":null}}`,
		`{"id":"1","type":"next","payload":{"data":{"admissionChecks":{"runId":"r\"1","at":"2026-01-02T03:04:05Z","verdict":"PASS"}}}}`,
		`{"type":"ping"}`,
	} {
		if v, ok := quickVerdict([]byte(bad)); ok {
			t.Errorf("%s: read as %+v", bad, v)
		}
	}
}
