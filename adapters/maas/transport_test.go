package maas_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/adapters/maas/sim"
)

func TestReadsRetryOn503AndRecover(t *testing.T) {
	e := newEnv(t, withMachines(spec("k7qpwx", sim.StatusReady, "ipmi")))
	e.sim.FailNext(2, sim.FaultUnavailable)
	ms, err := e.client.Machines(ctx, maas.MachineFilter{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("list after two 503s: %v", err)
	}
	if n := e.sim.CountRequests(http.MethodGet, ""); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
}

func TestReadsRetryBounded(t *testing.T) {
	e := newEnv(t, withConfig(func(c *maas.Config) { c.MaxRetries = 2 }))
	e.sim.SetFault(sim.FaultUnavailable)
	_, err := e.client.WhoAmI(ctx)
	ae := apiError(t, err, http.StatusServiceUnavailable)
	if !errors.Is(err, maas.ErrUnavailable) || ae.RetryAfter != 10*time.Second {
		t.Fatalf("%v, retry-after %v", err, ae.RetryAfter)
	}
	if n := e.sim.CountRequests(http.MethodGet, "whoami"); n != 3 {
		t.Fatalf("%d attempts, want 1 + 2 retries", n)
	}
}

func TestReadsRetryOnConflictWithRetryAfterAndDroppedConnections(t *testing.T) {
	e := newEnv(t, withMachines(spec("k7qpwx", sim.StatusReady, "ipmi")))
	e.sim.FailNext(1, sim.FaultConflictRetry)
	if _, err := e.client.Machine(ctx, "k7qpwx"); err != nil {
		t.Fatalf("read after a 409 with Retry-After: %v", err)
	}
	e.sim.FailNext(1, sim.FaultDrop)
	if _, err := e.client.Machine(ctx, "k7qpwx"); err != nil {
		t.Fatalf("read after a dropped connection: %v", err)
	}
	if n := e.sim.CountRequests(http.MethodGet, ""); n != 4 {
		t.Fatalf("%d attempts, want 4", n)
	}
}

func TestWritesAreNeverRetried(t *testing.T) {
	e := newEnv(t, withMachines(spec("k7qpwx", sim.StatusReady, "ipmi")))
	e.sim.FailNext(1, sim.FaultUnavailable)
	_, err := e.client.Commission(ctx, "k7qpwx", maas.CommissionOptions{})
	if !errors.Is(err, maas.ErrUnavailable) {
		t.Fatalf("commission during 503: %v", err)
	}
	e.sim.FailNext(1, sim.FaultDrop)
	_, err = e.client.PowerOff(ctx, "k7qpwx", maas.StopHard)
	var re *maas.RequestError
	if !errors.As(err, &re) || re.Op != "power_off" {
		t.Fatalf("power off on a dropped connection: %v", err)
	}
	if n := e.sim.CountRequests(http.MethodPost, "commission") + e.sim.CountRequests(http.MethodPost, "power_off"); n != 2 {
		t.Fatalf("%d POSTs, want 2 (no retries)", n)
	}
	e.wantStatus("k7qpwx", sim.StatusReady)
}

func TestUnreachableMAAS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c, err := maas.New(maas.Config{BaseURL: "http://" + addr + "/MAAS", APIKey: sim.NewAPIKey(), MaxRetries: 1, MaxRetryWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Version(ctx)
	var re *maas.RequestError
	if !errors.As(err, &re) || re.Path != "/MAAS/api/2.0/version/" {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestRequestTimeout(t *testing.T) {
	// A server that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { <-done; conn.Close() }()
		}
	}()
	c, err := maas.New(maas.Config{BaseURL: "http://" + ln.Addr().String() + "/MAAS", APIKey: sim.NewAPIKey(),
		RequestTimeout: 50 * time.Millisecond, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WhoAmI(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung server: %v", err)
	}
}

func TestSimulatorHangTimesOutOnceWhateverTheRetries(t *testing.T) {
	// The bound covers the call, retries included: a hung MAAS costs one RequestTimeout.
	e := newEnv(t, withConfig(func(c *maas.Config) { c.RequestTimeout = 200 * time.Millisecond; c.MaxRetries = 3 }))
	e.sim.SetFault(sim.FaultHang)
	_, err := e.client.Version(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Fatalf("hanging MAAS: %v", err)
	}
	if n := e.sim.CountRequests(http.MethodGet, ""); n != 1 {
		t.Fatalf("%d attempts, want 1: the first one used the whole bound", n)
	}
	e.sim.SetFault(sim.FaultNone)
	if _, err := e.client.Version(ctx); err != nil {
		t.Fatalf("after the fault cleared: %v", err)
	}
}

func TestRetryThatCannotStartInsideTheBoundIsNotMade(t *testing.T) {
	// MAAS asks to come back in 10 s; the call's bound is shorter, so it answers now with
	// MAAS's error instead of sleeping into its deadline.
	e := newEnv(t, withConfig(func(c *maas.Config) {
		c.RequestTimeout = 2 * time.Second
		c.MaxRetries = 3
		c.MaxRetryWait = time.Minute
	}))
	e.sim.SetFault(sim.FaultUnavailable)
	_, err := e.client.WhoAmI(ctx)
	if ae := apiError(t, err, http.StatusServiceUnavailable); ae.RetryAfter != 10*time.Second {
		t.Fatalf("%v, retry-after %v", err, ae.RetryAfter)
	}
	if n := e.sim.CountRequests(http.MethodGet, "whoami"); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

func TestResponseSizeLimit(t *testing.T) {
	e := newEnv(t, withMachines(sim.GenerateMachines(20, 7)...), withConfig(func(c *maas.Config) { c.MaxResponseBytes = 4096 }))
	_, err := e.client.Machines(ctx, maas.MachineFilter{})
	if !errors.Is(err, maas.ErrResponseTooLarge) {
		t.Fatalf("oversized list: %v", err)
	}
	if n := e.sim.CountRequests(http.MethodGet, ""); n != 1 {
		t.Fatalf("oversized response retried: %d", n)
	}
}

func TestCancelledContextStopsRetries(t *testing.T) {
	e := newEnv(t, withConfig(func(c *maas.Config) { c.MaxRetries = 50; c.MaxRetryWait = time.Hour }))
	e.sim.SetFault(sim.FaultUnavailable)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		// Cancel once the first attempt has been answered.
		for e.sim.CountRequests("", "whoami") == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	// Depending on when cancel lands, the error is the 503 or the
	// cancellation; either way there is no second attempt.
	if _, err := e.client.WhoAmI(cctx); err == nil {
		t.Fatal("no error")
	}
	if n := e.sim.CountRequests("", "whoami"); n != 1 {
		t.Fatalf("%d attempts after cancel", n)
	}
}
