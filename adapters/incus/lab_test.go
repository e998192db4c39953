package incus_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/testkit/incuslab"
)

// These tests run against a real three-member Incus cluster (testkit/incuslab). Most talk
// HTTPS to member 3, whose address is not in the cluster certificate's SANs, so they only
// pass through the fingerprint pin.

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// must(f())(t) returns f's value or fails the test with f's error.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestIncusCluster(t *testing.T) {
	lab := incuslab.Start(t, 3)
	m1, m2, m3 := lab.Members[0], lab.Members[1], lab.Members[2]
	cl := lab.Client(t, m3)

	t.Run("PinnedTLSToMemberOutsideSANs", func(t *testing.T) {
		ctx := ctxFor(t)
		pemData := must(os.ReadFile(lab.ClusterCertFile))(t)
		block, _ := pem.Decode(pemData)
		cert := must(x509.ParseCertificate(block.Bytes))(t)
		if err := cert.VerifyHostname(m3.Host()); err == nil {
			t.Fatalf("the cluster certificate names %s; this test needs a member outside its SANs (%v %v)", m3.Host(), cert.DNSNames, cert.IPAddresses)
		}
		// Ordinary verification against the cluster certificate fails for member 3 …
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}
		if resp, err := plain.Get(m3.URL() + "/1.0"); err == nil {
			resp.Body.Close()
			t.Fatal("host-name verification unexpectedly succeeded")
		}
		// … while the pinned client works, and sees the certificate it pinned.
		info := must(cl.ServerInfo(ctx, ""))(t)
		if info.ServerName != "m3" || info.Auth != "trusted" {
			t.Fatalf("ServerInfo via m3: %+v", info)
		}
		if cl.PinnedFingerprint() != incus.Fingerprint(cert.Raw) || info.CertificateFingerprint != cl.PinnedFingerprint() {
			t.Fatalf("pin %s, cluster cert %s, server says %s", cl.PinnedFingerprint(), incus.Fingerprint(cert.Raw), info.CertificateFingerprint)
		}
	})

	t.Run("Members", func(t *testing.T) {
		ms := must(cl.Members(ctxFor(t)))(t)
		var names []string
		for _, m := range ms {
			names = append(names, m.ServerName)
			lm := lab.Member(m.ServerName)
			if lm == nil || m.URL != lm.URL() || m.Status != incus.MemberOnline || m.Message != "Fully operational" ||
				m.Architecture == "" || !slices.Contains(m.Groups, "default") || m.FailureDomain != "default" || !m.Database {
				t.Errorf("member %+v", m)
			}
		}
		if !slices.Equal(sorted(names), []string{"m1", "m2", "m3"}) {
			t.Fatalf("members %v", names)
		}
		leader := slices.IndexFunc(ms, func(m incus.Member) bool { return slices.Contains(m.Roles, "database-leader") })
		if leader < 0 || ms[leader].ServerName != "m1" {
			t.Fatalf("m1 should lead: %+v", ms)
		}
		m, etag := must2(cl.Member(ctxFor(t), "m2"))(t)
		if m.ServerName != "m2" || len(etag) != 64 {
			t.Fatalf("member m2 %+v etag %q", m, etag)
		}
	})

	t.Run("ResourcesWithTarget", func(t *testing.T) {
		// Every lab member runs on this host, so each reports the host's own hardware.
		ctx := ctxFor(t)
		for _, m := range lab.Members {
			r := must(cl.Resources(ctx, m.Name))(t)
			info := must(cl.ServerInfo(ctx, m.Name))(t)
			if r.Architecture != info.KernelArchitecture || r.CPUs < runtime.NumCPU() || r.MemoryBytes < 256<<20 {
				t.Errorf("resources of %s: %+v (kernel architecture %s, %d CPUs usable here)", m.Name, r, info.KernelArchitecture, runtime.NumCPU())
			}
			for _, d := range r.Disks {
				if d.ID == "" || d.SizeBytes < 0 {
					t.Errorf("disk %+v", d)
				}
			}
		}
		if _, err := cl.Resources(ctx, "nope"); !incus.IsNotFound(err) {
			t.Fatalf("unknown target: %v", err)
		}
	})

	t.Run("ServerInfoWithTarget", func(t *testing.T) {
		ctx := ctxFor(t)
		local := must(cl.ServerInfo(ctx, ""))(t)
		for _, m := range lab.Members {
			info := must(cl.ServerInfo(ctx, m.Name))(t)
			if info.ServerName != m.Name || info.ServerVersion != local.ServerVersion || info.APIExtensions != local.APIExtensions ||
				info.APIExtensions < 100 || !info.ServerClustered || info.Kernel != "Linux" || info.KernelVersion == "" ||
				info.KernelArchitecture == "" || len(info.Architectures) == 0 || info.OSName == "" || info.OSVersion == "" {
				t.Errorf("ServerInfo(target %s) = %+v", m.Name, info)
			}
			if info.Config["core.https_address"] != m.Address {
				t.Errorf("%s config %v", m.Name, info.Config)
			}
		}
		if !regexp.MustCompile(`^\d+\.\d+(\.\d+)?$`).MatchString(local.ServerVersion) {
			t.Errorf("version %q", local.ServerVersion)
		}
		_, err := cl.ServerInfo(ctx, "nope")
		if !incus.IsNotFound(err) {
			t.Fatalf("unknown target: %v", err)
		}
		cfg := must(cl.GetServerConfig(ctx))(t)
		if cfg["core.https_address"] != m3.Address {
			t.Fatalf("server config %v", cfg)
		}
		if _, set := cfg["cluster.healing_threshold"]; set {
			t.Fatalf("cluster.healing_threshold is unset in a fresh lab, got %v", cfg)
		}
	})

	t.Run("ClusterAndMemberConfigKeys", func(t *testing.T) {
		ci := must(cl.Cluster(ctxFor(t)))(t)
		if ci.ServerName != "m3" || !ci.Enabled {
			t.Fatalf("%+v", ci)
		}
		i := slices.IndexFunc(ci.MemberConfig, func(k incus.MemberConfigKey) bool {
			return k.Entity == "storage-pool" && k.Name == incuslab.Pool && k.Key == "source"
		})
		if i < 0 {
			t.Fatalf("member_config lacks the pool source: %+v", ci.MemberConfig)
		}
	})

	t.Run("StoragePoolsPerMember", func(t *testing.T) {
		ctx := ctxFor(t)
		pools := must(cl.StoragePools(ctx))(t)
		if len(pools) != 1 || pools[0].Name != incuslab.Pool || pools[0].Driver != "dir" || pools[0].Status != incus.StateCreated ||
			!slices.Equal(sorted(pools[0].Locations), []string{"m1", "m2", "m3"}) || pools[0].Source() != "" {
			t.Fatalf("pools %+v", pools)
		}
		for _, m := range lab.Members {
			p := must(cl.StoragePool(ctx, incuslab.Pool, m.Name))(t)
			if p.Status != incus.StateCreated || p.Source() != filepath.Join(m.Dir, "storage-pools", incuslab.Pool) {
				t.Errorf("pool on %s: %+v", m.Name, p)
			}
		}
		if _, err := cl.StoragePool(ctx, "nope", ""); !incus.IsNotFound(err) {
			t.Errorf("unknown pool: %v", err)
		}
		if _, err := cl.StoragePool(ctx, incuslab.Pool, "nope"); !incus.IsNotFound(err) {
			t.Errorf("unknown target: %v", err)
		}
	})

	t.Run("NetworksPerMember", func(t *testing.T) {
		ctx := ctxFor(t)
		// A macvlan network on "lo": managed, per-member parent, nothing created on the host.
		for _, m := range lab.Members {
			mustCLI(t, lab, m1, "network", "create", "mv0", "--type=macvlan", "parent=lo", "--target", m.Name)
		}
		mustCLI(t, lab, m1, "network", "create", "mv0", "--type=macvlan")
		t.Cleanup(func() { _, _ = lab.CLI(m1, "network", "delete", "mv0") })
		// mv1 is only defined on m1: Pending.
		mustCLI(t, lab, m1, "network", "create", "mv1", "--type=macvlan", "parent=lo", "--target", "m1")
		t.Cleanup(func() { _, _ = lab.CLI(m1, "network", "delete", "mv1") })

		all := must(cl.Networks(ctx))(t)
		managed := must(cl.ManagedNetworks(ctx))(t)
		var names []string
		for _, n := range managed {
			names = append(names, n.Name)
		}
		if !slices.Equal(sorted(names), []string{"mv0", "mv1"}) || len(all) <= len(managed) {
			t.Fatalf("managed %v, all %+v", names, all)
		}
		if i := slices.IndexFunc(all, func(n incus.Network) bool { return n.Name == "lo" }); i < 0 || all[i].Managed || all[i].Status != "" {
			t.Fatalf("lo should be an unmanaged host interface: %+v", all)
		}
		for _, m := range lab.Members {
			n := must(cl.Network(ctx, "mv0", m.Name))(t)
			if !n.Managed || n.Type != "macvlan" || n.Status != incus.StateCreated || n.Config["parent"] != "lo" {
				t.Errorf("mv0 on %s: %+v", m.Name, n)
			}
		}
		if n := must(cl.Network(ctx, "mv1", ""))(t); n.Status != incus.StatePending {
			t.Errorf("mv1 cluster-wide: %+v", n)
		}
		if n := must(cl.Network(ctx, "mv1", "m1"))(t); n.Status != incus.StatePending || n.Config["parent"] != "lo" {
			t.Errorf("mv1 on m1: %+v", n)
		}
		if n := must(cl.Network(ctx, "mv1", "m2"))(t); n.Status != incus.StateUnknown {
			t.Errorf("mv1 on m2 (no record): %+v", n)
		}
		if _, err := cl.Network(ctx, "nope", "m2"); !incus.IsNotFound(err) {
			t.Errorf("unknown network: %v", err)
		}
		ci := must(cl.Cluster(ctx))(t)
		if !slices.ContainsFunc(ci.MemberConfig, func(k incus.MemberConfigKey) bool {
			return k.Entity == "network" && k.Name == "mv0" && k.Key == "parent"
		}) {
			t.Errorf("member_config lacks mv0 parent: %+v", ci.MemberConfig)
		}
	})

	t.Run("MemberState", func(t *testing.T) {
		st := must(cl.MemberState(ctxFor(t), "m2"))(t)
		ps, ok := st.StoragePools[incuslab.Pool]
		if st.SysInfo.TotalRAM == 0 || st.SysInfo.Processes == 0 || len(st.SysInfo.LoadAverages) != 3 || !ok || ps.Space.Total == 0 {
			t.Fatalf("%+v", st)
		}
	})

	t.Run("JoinTokens", func(t *testing.T) { testJoinTokens(t, lab, cl) })
	t.Run("UpdateMemberWithETag", func(t *testing.T) { testUpdateMember(t, lab, cl) })

	t.Run("UnknownMemberIsTypedNotFound", func(t *testing.T) {
		ctx := ctxFor(t)
		_, _, err := cl.Member(ctx, "nope")
		var ie *incus.Error
		if !errors.As(err, &ie) || ie.Status != 404 || ie.Message != "Cluster member not found" || ie.Method != "GET" ||
			ie.Path != "/1.0/cluster/members/nope" || !incus.IsNotFound(err) || !errors.Is(err, incus.ErrNotFound) {
			t.Fatalf("%#v", err)
		}
		put := incus.MemberPut{Groups: []string{"default"}, FailureDomain: "default"}
		for what, err := range map[string]error{
			"update": cl.UpdateMember(ctx, "nope", put, strings.Repeat("0", 64)),
			"delete": cl.DeleteMember(ctx, "nope", false),
			"state":  func() error { _, err := cl.MemberState(ctx, "nope"); return err }(),
			"op":     func() error { _, err := cl.Operation(ctx, "00000000-0000-0000-0000-000000000000"); return err }(),
		} {
			if !incus.IsNotFound(err) {
				t.Errorf("%s: %v", what, err)
			}
		}
	})

	t.Run("PlacementAvoidsManualMember", func(t *testing.T) { testPlacement(t, lab, cl) })

	t.Run("WaitOperation", func(t *testing.T) {
		ctx := ctxFor(t)
		tok := must(cl.IssueJoinToken(ctx, "w1"))(t)
		// A token stays Running: the wait runs out and says so (HTTP 200 with an error body).
		_, err := cl.WaitOperation(ctx, tok.OperationID, time.Second)
		if !errors.Is(err, incus.ErrWaitTimeout) {
			t.Fatalf("want a wait timeout, got %v", err)
		}
		if err := cl.RevokeJoinToken(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		op, err := cl.WaitOperation(ctx, tok.OperationID, 10*time.Second)
		if err != nil && !incus.IsNotFound(err) { // it may already be gone
			if !incus.IsCancelled(err) || op.StatusCode != incus.StatusCancelled {
				t.Fatalf("revoked token: %+v %v", op, err)
			}
		}
		if _, err := cl.WaitOperation(ctx, "00000000-0000-0000-0000-000000000000", time.Second); !incus.IsNotFound(err) {
			t.Fatalf("unknown operation: %v", err)
		}
	})

	t.Run("WrongPinIsRefused", func(t *testing.T) {
		ctx := ctxFor(t)
		// Member 1's own server certificate is a real Incus certificate, but not the cluster one.
		for name, certFile := range map[string]string{
			"member server cert": filepath.Join(m1.Dir, "server.crt"),
			"unrelated cert":     writeCert(t, newCert(t)),
		} {
			cfg := lab.ConfigFor(m2)
			cfg.ServerCertFile = certFile
			bad := must(incus.New(cfg))(t)
			_, err := bad.ServerInfo(ctx, "")
			if !errors.Is(err, incus.ErrCertificateMismatch) {
				t.Errorf("%s: want ErrCertificateMismatch, got %v", name, err)
			}
			bad.Close()
		}
	})

	t.Run("UntrustedClientIsForbidden", func(t *testing.T) {
		ctx := ctxFor(t)
		cfg := lab.ConfigFor(m2)
		cert := newCert(t)
		cfg.ClientCertFile, cfg.ClientKeyFile = writeCert(t, cert), cert.keyFile
		stranger := must(incus.New(cfg))(t)
		defer stranger.Close()
		info, err := stranger.ServerInfo(ctx, "")
		if !errors.Is(err, incus.ErrUntrusted) || info.Auth != "untrusted" {
			t.Fatalf("%+v %v", info, err)
		}
		if _, err := stranger.Members(ctx); !incus.IsForbidden(err) {
			t.Fatalf("members as a stranger: %v", err)
		}
	})

	t.Run("UnixSocket", func(t *testing.T) {
		ctx := ctxFor(t)
		sc := lab.SocketClient(t, m2)
		info := must(sc.ServerInfo(ctx, ""))(t)
		if info.ServerName != "m2" || info.Auth != "trusted" || sc.PinnedFingerprint() != "" || !strings.HasPrefix(sc.Endpoint(), "unix:") {
			t.Fatalf("%+v %s", info, sc.Endpoint())
		}
		if ms := must(sc.Members(ctx))(t); len(ms) != 3 {
			t.Fatalf("%+v", ms)
		}
		// Trusting the same certificate again is a typed conflict.
		data := must(os.ReadFile(lab.ClientCertFile))(t)
		block, _ := pem.Decode(data)
		cert := must(x509.ParseCertificate(block.Bytes))(t)
		_, err := sc.AddTrustedCertificate(ctx, "again", cert, "")
		if !incus.IsConflict(err) {
			t.Fatalf("duplicate trust: %v", err)
		}
		certs := must(sc.TrustedCertificates(ctx))(t)
		if !slices.ContainsFunc(certs, func(c incus.TrustedCertificate) bool {
			return c.Fingerprint == incus.Fingerprint(cert.Raw) && c.Type == "client" && !c.Restricted
		}) {
			t.Fatalf("client cert not in the trust store: %+v", certs)
		}
	})

	t.Run("LifecycleEvents", func(t *testing.T) {
		// Short keep-alives and a short request timeout: a stream Incus did not keep alive
		// (no pongs) would end within 1.2 s, long before the events below.
		t.Cleanup(incus.SetEventPing(200 * time.Millisecond))
		https, socket := lab.ConfigFor(m3), lab.SocketConfig(m1)
		https.Timeout, socket.Timeout = time.Second, time.Second
		testLifecycleEvents(t, lab, must(incus.New(https))(t), must(incus.New(socket))(t))
	})

	// Last: it changes the cluster's shape.
	t.Run("DeleteMember", func(t *testing.T) {
		ctx := ctxFor(t)
		m4 := lab.StartUnjoined(t, "m4")
		joined := make(chan struct{})
		go func() { defer close(joined); lab.Join(t, m4) }()
		// A read aimed at m4 the moment it is a member (what an administrator's first
		// admission check does) is answered, not refused 403 while m4 loads the cluster's
		// trust store (Client.get asks again).
		for {
			_, err := cl.ServerInfo(ctx, "m4")
			if err == nil {
				break
			}
			if !incus.IsNotFound(err) {
				t.Fatalf("m4 read as it joined: %v", err)
			}
			select {
			case <-joined:
				t.Fatalf("m4 unread once joined: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		<-joined
		if ms := must(cl.Members(ctx))(t); len(ms) != 4 {
			t.Fatalf("%d members after join", len(ms))
		}
		if err := cl.DeleteMember(ctx, "m4", false); err != nil {
			t.Fatal(err)
		}
		ms := must(cl.Members(ctx))(t)
		if slices.ContainsFunc(ms, func(m incus.Member) bool { return m.ServerName == "m4" }) || len(ms) != 3 {
			t.Fatalf("m4 still listed: %+v", ms)
		}
	})
}

// must2(f())(t) is must for functions returning two values and an error.
func must2[A, B any](a A, b B, err error) func(*testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

func mustCLI(t *testing.T, lab *incuslab.Cluster, m *incuslab.Member, args ...string) string {
	t.Helper()
	out, err := lab.CLI(m, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func testJoinTokens(t *testing.T, lab *incuslab.Cluster, cl *incus.Client) {
	ctx := ctxFor(t)
	before := time.Now()
	tok := must(cl.IssueJoinToken(ctx, "m7"))(t)
	t.Cleanup(func() { _ = cl.RevokeJoinToken(context.Background(), "m7") })

	var addrs []string
	for _, m := range lab.Members {
		addrs = append(addrs, m.Address)
	}
	if tok.ServerName != "m7" || tok.Fingerprint != cl.PinnedFingerprint() || !slices.Equal(sorted(tok.Addresses), sorted(addrs)) ||
		!tok.ExpiresAt.After(before.Add(time.Hour)) || tok.OperationID == "" {
		t.Fatalf("token %v: fingerprint %s addresses %v", tok, tok.Fingerprint, tok.Addresses)
	}
	// Decoded: compact JSON, snake_case keys in the CLI's order.
	raw := must(base64.StdEncoding.DecodeString(tok.Reveal()))(t)
	keys := regexp.MustCompile(`"([a-z_]+)":`).FindAllStringSubmatch(string(raw), -1)
	var order []string
	for _, k := range keys {
		order = append(order, k[1])
	}
	if !slices.Equal(order, []string{"server_name", "fingerprint", "addresses", "secret", "expires_at"}) {
		t.Fatalf("key order %v", order)
	}
	var dec struct {
		ServerName  string    `json:"server_name"`
		Fingerprint string    `json:"fingerprint"`
		Addresses   []string  `json:"addresses"`
		Secret      string    `json:"secret"`
		ExpiresAt   time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(raw, &dec); err != nil || dec.ServerName != "m7" || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(dec.Secret) ||
		!dec.ExpiresAt.Equal(tok.ExpiresAt) || dec.Fingerprint != tok.Fingerprint || !slices.Equal(dec.Addresses, tok.Addresses) {
		t.Fatalf("decoded %v %v", err, dec.ServerName)
	}
	// Byte for byte what the CLI prints for the same pending token.
	if got := cliToken(t, lab, "m7"); got != tok.Reveal() {
		t.Fatalf("CLI token differs from ours:\n cli %s\nours %s", got, tok.Reveal())
	}
	if parsed := must(incus.ParseJoinToken(tok.Reveal()))(t); parsed.ServerName != "m7" || parsed.Reveal() != tok.Reveal() {
		t.Fatalf("parse: %v", parsed)
	}
	// The token's description never shows it.
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%+v", tok), fmt.Sprintf("%#v", tok), string(must(json.Marshal(tok))(t))} {
		if strings.Contains(s, dec.Secret) || strings.Contains(s, tok.Reveal()) {
			t.Fatalf("token revealed by %q", s)
		}
	}

	// Pending: only name, expiry and operation, seen from every member.
	for _, m := range lab.Members {
		p := pendingFor(t, lab.SocketClient(t, m), "m7")
		if len(p) != 1 || p[0].OperationID != tok.OperationID || !p[0].ExpiresAt.Equal(tok.ExpiresAt) {
			t.Fatalf("pending via %s: %+v", m.Name, p)
		}
		if s := fmt.Sprintf("%#v", p); strings.Contains(s, dec.Secret) {
			t.Fatal("pending list carries the secret")
		}
	}

	// Issuing again cancels the first.
	tok2 := must(cl.IssueJoinToken(ctx, "m7"))(t)
	if tok2.OperationID == tok.OperationID || tok2.Reveal() == tok.Reveal() {
		t.Fatal("a second token should be new")
	}
	if p := pendingFor(t, cl, "m7"); len(p) != 1 || p[0].OperationID != tok2.OperationID {
		t.Fatalf("after re-issue: %+v", p)
	}
	assertNotRunning(t, cl, tok.OperationID)

	// Revoke.
	if err := cl.RevokeJoinToken(ctx, "m7"); err != nil {
		t.Fatal(err)
	}
	if p := pendingFor(t, cl, "m7"); len(p) != 0 {
		t.Fatalf("after revoke: %+v", p)
	}
	assertNotRunning(t, cl, tok2.OperationID)
	err := cl.RevokeJoinToken(ctx, "m7")
	if !errors.Is(err, incus.ErrNoJoinToken) || !incus.IsNotFound(err) {
		t.Fatalf("revoking nothing: %v", err)
	}

	// Names: refused by us before Incus, or by Incus for an existing member.
	if _, err := cl.IssueJoinToken(ctx, "bad name!"); err == nil {
		t.Fatal("invalid name accepted")
	}
	_, err = cl.IssueJoinToken(ctx, "m2")
	var ie *incus.Error
	if !errors.As(err, &ie) || !strings.Contains(ie.Message, "already has a member") {
		t.Fatalf("token for an existing member: %v", err)
	}
}

func pendingFor(t *testing.T, cl *incus.Client, name string) []incus.PendingJoinToken {
	t.Helper()
	var out []incus.PendingJoinToken
	for _, p := range must(cl.PendingJoinTokens(ctxFor(t)))(t) {
		if p.ServerName == name {
			out = append(out, p)
		}
	}
	return out
}

// assertNotRunning checks an operation is cancelled (or already gone).
func assertNotRunning(t *testing.T, cl *incus.Client, id string) {
	t.Helper()
	op, err := cl.Operation(ctxFor(t), id)
	if incus.IsNotFound(err) {
		return
	}
	if err != nil || op.StatusCode != incus.StatusCancelled {
		t.Fatalf("operation %s: %+v %v", id, op, err)
	}
}

// cliToken returns the token `incus cluster list-tokens` prints for name.
func cliToken(t *testing.T, lab *incuslab.Cluster, name string) string {
	t.Helper()
	out := mustCLI(t, lab, lab.Members[0], "cluster", "list-tokens", "--format", "csv")
	rows := must(csv.NewReader(strings.NewReader(out)).ReadAll())(t)
	for _, r := range rows {
		if len(r) >= 2 && r[0] == name {
			return r[1]
		}
	}
	t.Fatalf("no CLI token row for %s", name)
	return ""
}

func testUpdateMember(t *testing.T, lab *incuslab.Cluster, cl *incus.Client) {
	ctx := ctxFor(t)
	mustCLI(t, lab, lab.Members[0], "cluster", "group", "create", "g1")
	orig, _ := must2(cl.Member(ctx, "m2"))(t)
	t.Cleanup(func() {
		ctx := context.Background()
		cur, etag, err := cl.Member(ctx, "m2")
		if err == nil {
			// Keep the raft-derived roles as they are now; restore the rest.
			put := orig.Put()
			put.Roles = cur.Put().Roles
			put.Roles = slices.DeleteFunc(put.Roles, func(r string) bool { return r == "event-hub" })
			err = cl.UpdateMember(ctx, "m2", put, etag)
		}
		if err != nil {
			t.Errorf("restore m2: %v", err)
		}
		if after, _, err := cl.Member(ctx, "m2"); err != nil || !samePut(after.Put(), orig.Put()) {
			t.Errorf("m2 not restored: %+v (was %+v) %v", after.Put(), orig.Put(), err)
		}
		if _, err := lab.CLI(lab.Members[0], "cluster", "group", "delete", "g1"); err != nil {
			t.Errorf("delete group: %v", err)
		}
	})

	// Give m2 a description, a failure domain, a second group and a stored role.
	_, etag := must2(cl.Member(ctx, "m2"))(t)
	staged := orig.Put()
	staged.Description = "rack 7, slot 3"
	staged.FailureDomain = "fd-a"
	staged.Groups = append(staged.Groups, "g1")
	staged.Roles = append(staged.Roles, "event-hub")
	if err := cl.UpdateMember(ctx, "m2", staged, etag); err != nil {
		t.Fatal(err)
	}
	before, etag := must2(cl.Member(ctx, "m2"))(t)
	if !samePut(before.Put(), staged) {
		t.Fatalf("staged %+v, read %+v", staged, before.Put())
	}

	// Hold: set scheduler.instance=manual, sending everything else back.
	hold := before.Put()
	hold.Config["scheduler.instance"] = "manual"
	if err := cl.UpdateMember(ctx, "m2", hold, etag); err != nil {
		t.Fatal(err)
	}
	held, heldTag := must2(cl.Member(ctx, "m2"))(t)
	if held.Config["scheduler.instance"] != "manual" || !samePut(held.Put(), hold) || heldTag == etag {
		t.Fatalf("held %+v", held.Put())
	}

	// The ETag read before the hold is stale now.
	err := cl.UpdateMember(ctx, "m2", held.Put(), etag)
	var ie *incus.Error
	if !incus.IsPreconditionFailed(err) || !errors.As(err, &ie) || ie.Status != 412 || ie.Method != "PUT" || ie.Path != "/1.0/cluster/members/m2" {
		t.Fatalf("stale ETag: %v", err)
	}

	// Admit: remove the key, everything else preserved.
	admit := held.Put()
	delete(admit.Config, "scheduler.instance")
	if err := cl.UpdateMember(ctx, "m2", admit, heldTag); err != nil {
		t.Fatal(err)
	}
	admitted, _ := must2(cl.Member(ctx, "m2"))(t)
	if _, ok := admitted.Config["scheduler.instance"]; ok || !samePut(admitted.Put(), before.Put()) {
		t.Fatalf("admitted %+v, want %+v", admitted.Put(), before.Put())
	}
}

// samePut compares writable fields, ignoring order of roles and groups.
func samePut(a, b incus.MemberPut) bool {
	if a.Description != b.Description || a.FailureDomain != b.FailureDomain || len(a.Config) != len(b.Config) ||
		!slices.Equal(sorted(a.Roles), sorted(b.Roles)) || !slices.Equal(sorted(a.Groups), sorted(b.Groups)) {
		return false
	}
	for k, v := range a.Config {
		if b.Config[k] != v {
			return false
		}
	}
	return true
}

func setManual(t *testing.T, cl *incus.Client, name string, on bool) {
	t.Helper()
	m, etag, err := cl.Member(ctxFor(t), name)
	if err != nil {
		t.Fatal(err)
	}
	put := m.Put()
	if on {
		put.Config["scheduler.instance"] = "manual"
	} else {
		delete(put.Config, "scheduler.instance")
	}
	if err := cl.UpdateMember(ctxFor(t), name, put, etag); err != nil {
		t.Fatal(err)
	}
}

func testPlacement(t *testing.T, lab *incuslab.Cluster, cl *incus.Client) {
	ctx := ctxFor(t)
	setManual(t, cl, "m3", true)
	t.Cleanup(func() { setManual(t, cl, "m3", false) })
	var created []string
	t.Cleanup(func() {
		for _, n := range created {
			if err := cl.DeleteInstance(context.Background(), n); err != nil {
				t.Errorf("delete %s: %v", n, err)
			}
		}
	})
	for i := range 4 {
		name := fmt.Sprintf("p%d", i+1)
		in := must(cl.CreateEmptyInstance(ctx, name, "", incuslab.Pool))(t)
		created = append(created, name)
		if in.Location == "m3" || in.Location == "" || in.Status != "Stopped" {
			t.Fatalf("untargeted %s landed on %q (%+v)", name, in.Location, in)
		}
	}
	in := must(cl.CreateEmptyInstance(ctx, "pt", "m3", incuslab.Pool))(t)
	created = append(created, "pt")
	if in.Location != "m3" {
		t.Fatalf("targeted instance on %q", in.Location)
	}
	locs := map[string]string{}
	for _, i := range must(cl.Instances(ctx))(t) {
		locs[i.Name] = i.Location
	}
	if locs["pt"] != "m3" || locs["p1"] == "m3" || len(locs) != 5 {
		t.Fatalf("instances %v", locs)
	}
	if _, err := cl.CreateEmptyInstance(ctx, "px", "nope", incuslab.Pool); !incus.IsNotFound(err) {
		t.Fatalf("unknown target: %v", err)
	}
}

type testCert struct {
	*x509.Certificate
	keyFile string
}

func newCert(t *testing.T) testCert {
	t.Helper()
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "stranger"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))(t)
	keyDER := must(x509.MarshalPKCS8PrivateKey(key))(t)
	keyFile := filepath.Join(t.TempDir(), "stranger.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return testCert{must(x509.ParseCertificate(der))(t), keyFile}
}

func writeCert(t *testing.T, c testCert) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// testLifecycleEvents opens the event stream over pinned HTTPS (to member 3, outside the
// certificate's SANs) and over member 1's unix socket, changes the cluster with the incus
// CLI, and expects the events incus-events.md lists, from both streams.
func testLifecycleEvents(t *testing.T, lab *incuslab.Cluster, https, socket *incus.Client) {
	ctx := ctxFor(t)
	type seen struct {
		via string
		ev  incus.LifecycleEvent
	}
	got := make(chan seen, 64)
	for via, cl := range map[string]*incus.Client{"https": https, "socket": socket} {
		s, err := cl.Lifecycle(ctx)
		if err != nil {
			t.Fatalf("%s: %v", via, err)
		}
		t.Cleanup(func() { s.Close() })
		go func() {
			for {
				ev, err := s.Next()
				if err != nil {
					return
				}
				got <- seen{via, ev}
			}
		}()
	}
	// expect waits until both streams delivered an event with action about member.
	expect := func(action, member string) {
		t.Helper()
		want := map[string]bool{"https": true, "socket": true}
		deadline := time.After(30 * time.Second)
		for len(want) > 0 {
			select {
			case s := <-got:
				if s.ev.Action == action && (member == "" || s.ev.Member() == member) {
					if s.ev.Location == "" || s.ev.Timestamp.IsZero() {
						t.Errorf("%s: event without location or time: %+v", s.via, s.ev)
					}
					delete(want, s.via)
				}
			case <-deadline:
				t.Fatalf("no %s event for %q from %v", action, member, want)
			}
		}
	}
	time.Sleep(3 * time.Second) // several keep-alive periods (see the caller)
	m1 := lab.Members[0]
	mustCLI(t, lab, m1, "cluster", "set", "m2", "scheduler.instance=manual")
	expect(incus.ActionMemberUpdated, "m2")
	mustCLI(t, lab, m1, "cluster", "unset", "m2", "scheduler.instance")
	expect(incus.ActionMemberUpdated, "m2")
	if _, err := https.IssueJoinToken(ctx, "m9"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = https.RevokeJoinToken(context.Background(), "m9") })
	expect(incus.ActionTokenCreated, "")
}
