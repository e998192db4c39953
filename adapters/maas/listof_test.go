package maas

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/apelora/fabric/adapters/maas/sim"
)

// listOf reads a list one element at a time; it must read what json.Decoder.Decode reads:
// the same machines, the same null, and an error where Decode gives one (the same error
// for an answer that is not a list).
func TestListOfReadsWhatDecodeReads(t *testing.T) {
	machines := simulatorMachineList(t, 7)
	bodies := []string{string(machines), "[]", " [ ] ", "null", `[{"system_id":"abc","hostname":"h"}, {}]`,
		`{"system_id":"abc"}`, `"machines"`, `42`, `true`, `[{"system_id":1}]`, `[{"system_id":"a"}`, `[{"system_id":"a"},]`,
		`[1, 2]`, `[null, {"hostname":"x"}]`, "", `<html>`, `[{"tag_names":["a","b"],"domain":{"name":"maas"}}] trailing`}
	for _, b := range bodies {
		var want, got []wireMachine
		werr := json.NewDecoder(strings.NewReader(b)).Decode(&want)
		gerr := decodeJSON(strings.NewReader(b), listOf(&got))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%.60q: Decode says %v, listOf %v", b, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%.60q: Decode read %+v, listOf %+v", b, want, got)
		}
		if _, notList := werr.(*json.UnmarshalTypeError); notList && b[0] != '[' && werr.Error() != gerr.Error() {
			t.Fatalf("%.60q: Decode says %v, listOf %v", b, werr, gerr)
		}
	}
}

// simulatorMachineList is the simulator's answer to GET machines/ with n machines, as the
// client received it.
func simulatorMachineList(t *testing.T, n int) []byte {
	key := sim.NewAPIKey()
	s, err := sim.New(sim.Options{
		Users:   []sim.User{{Username: "apelora", APIKey: key, Admin: true}},
		Fixture: sim.Fixture{Machines: sim.GenerateMachines(n, 1)},
		Clock:   sim.NewFakeClock(sim.RealClock().Now()),
	})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	c, err := New(Config{BaseURL: ep.BaseURL, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	signed := c.hc.Transport
	c.hc = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := signed.RoundTrip(r)
		if err == nil {
			raw, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(raw))
		}
		return resp, err
	})}
	ms, err := c.Machines(context.Background(), MachineFilter{})
	if err != nil || len(ms) != n || ms[n-1].SystemID == "" {
		t.Fatalf("%d machines (%v): %v", len(ms), ms, err)
	}
	return raw
}
