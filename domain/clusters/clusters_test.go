package clusters

import (
	"errors"
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/apperr"
)

func TestResolveNamesTheCallsCluster(t *testing.T) {
	a, b := Cluster{ID: 1, Name: "rack1", Adopted: true}, Cluster{ID: 2, Name: "rack2", Adopted: true}
	two := []Cluster{a, b}
	id := func(n int64) *int64 { return &n }
	for _, c := range []struct {
		name   string
		all    []Cluster
		record *int64
		given  string
		want   string // cluster name, or the error code
		says   string
	}{
		{"record and argument agree", two, id(2), "rack2", "rack2", ""},
		{"the record alone", two, id(1), "", "rack1", ""},
		{"the argument alone", two, nil, "rack2", "rack2", ""},
		{"neither, one cluster", []Cluster{a}, nil, "", "rack1", ""},
		{"neither, two clusters", two, nil, "", string(apperr.InvalidInput), "name the cluster: m1 has no machine record in a cluster and Apelora manages rack1, rack2"},
		{"neither, none", nil, nil, "", string(apperr.FailedPrecondition), "no Incus cluster is registered"},
		{"an unknown argument", two, nil, "nope", string(apperr.NotFound), `no cluster named "nope": registered are rack1, rack2`},
		{"an unknown argument, none registered", nil, nil, "nope", string(apperr.NotFound), "no cluster is registered"},
		{"they differ", two, id(1), "rack2", string(apperr.FailedPrecondition), "m1 is a machine of cluster rack1, not rack2"},
		{"a record in a cluster not registered", two, id(9), "", string(apperr.Internal), "cluster 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Resolve(c.all, "m1", c.record, c.given)
			if err == nil {
				if got.Name != c.want {
					t.Fatalf("got %s, want %s", got.Name, c.want)
				}
				return
			}
			if string(apperr.CodeOf(err)) != c.want || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %s %q, want %s saying %q", apperr.CodeOf(err), err.Error(), c.want, c.says)
			}
			if e, ok := apperr.As(err); ok && e.Code != apperr.Internal && e.Code != apperr.FailedPrecondition && e.Field != "cluster" {
				t.Fatalf("refusal on field %q, want cluster", e.Field)
			}
		})
	}
	// A move is told apart, for the steps that may move a registered machine.
	got, err := Resolve(two, "m1", id(1), "rack2")
	var moved *MovedError
	if !errors.As(err, &moved) || moved.From.Name != "rack1" || moved.To.Name != "rack2" || got.Name != "rack2" {
		t.Fatalf("a move: %+v %v", got, err)
	}
}

func TestParseRegistrationRefusesWhatCannotBeAClusterOrItsCertificate(t *testing.T) {
	cert := testCertificate(t)
	ok, err := ParseRegistration("rack2", "https://10.0.0.5", cert+"\n# a comment\n")
	if err != nil || ok.URL != "https://10.0.0.5:8443" || len(ok.Fingerprints) != 1 || ok.CertificatePEM != cert {
		t.Fatalf("a good registration: %+v %v", ok, err)
	}
	if ok, err := ParseRegistration("rack2", "https://[::1]:9443/", cert); err != nil || ok.URL != "https://[::1]:9443" {
		t.Fatalf("an IPv6 URL: %+v %v", ok, err)
	}
	key := "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"
	for _, c := range []struct{ name, n, url, pem, field string }{
		{"an empty name", "", "https://h:8443", cert, "name"},
		{"an upper-case name", "Rack2", "https://h:8443", cert, "name"},
		{"a name too long", strings.Repeat("a", 64), "https://h:8443", cert, "name"},
		{"a NUL in the name", "ra\x00ck", "https://h:8443", cert, "name"},
		{"http", "rack2", "http://h:8443", cert, "url"},
		{"unix", "rack2", "unix:/var/lib/incus/unix.socket", cert, "url"},
		{"a path", "rack2", "https://h:8443/1.0", cert, "url"},
		{"a query", "rack2", "https://h:8443?x=1", cert, "url"},
		{"a user", "rack2", "https://u:p@h:8443", cert, "url"},
		{"no host", "rack2", "https://:8443", cert, "url"},
		{"a bad port", "rack2", "https://h:99999", cert, "url"},
		{"spaces", "rack2", "https://h :8443", cert, "url"},
		{"an empty URL", "rack2", "", cert, "url"},
		{"a long URL", "rack2", "https://" + strings.Repeat("h", 600), cert, "url"},
		{"no certificate", "rack2", "https://h:8443", "", "clusterCertificate"},
		{"not PEM", "rack2", "https://h:8443", "hello", "clusterCertificate"},
		{"a key", "rack2", "https://h:8443", cert + key, "clusterCertificate"},
		{"NUL", "rack2", "https://h:8443", cert + "\x00", "clusterCertificate"},
		{"invalid UTF-8", "rack2", "https://h:8443", cert + "\xff", "clusterCertificate"},
		{"1 MiB", "rack2", "https://h:8443", strings.Repeat(cert, 1<<20/len(cert)+1), "clusterCertificate"},
		{"not X.509", "rack2", "https://h:8443", "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n", "clusterCertificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseRegistration(c.n, c.url, c.pem)
			e, ok := apperr.As(err)
			if !ok || e.Code != apperr.InvalidInput || e.Field != c.field {
				t.Fatalf("got %v, want INVALID_INPUT on %s", err, c.field)
			}
			if strings.ContainsRune(e.Message, 0) || len(e.Message) > 600 {
				t.Fatalf("the refusal quotes too much: %q", e.Message)
			}
		})
	}
}

func TestARemovalIsRefusedWhileAnythingNamesTheCluster(t *testing.T) {
	if r := (References{Grants: 3, TrackedMembers: 2, FenceState: 1}).Refusal("rack2"); r != "" {
		t.Fatalf("what goes with the cluster refuses it: %s", r)
	}
	r := References{MachineRecords: 2, FenceMappings: 1, UnfinishedRollingReboot: 1}.Refusal("rack2")
	for _, want := range []string{"cluster rack2", "2 machine records", "1 fence mapping", "1 unfinished rolling reboot"} {
		if !strings.Contains(r, want) {
			t.Fatalf("%q does not say %q", r, want)
		}
	}
}

func TestOfRecordCountsARecordWithoutClusterForTheEnvironments(t *testing.T) {
	env := Cluster{ID: 1, Name: "default", Adopted: true, FromEnvironment: true}
	b := Cluster{ID: 2, Name: "rack2", Adopted: true}
	c := Cluster{ID: 3, Name: "rack3", Adopted: true}
	id := func(n int64) *int64 { return &n }
	for _, k := range []struct {
		name   string
		all    []Cluster
		record *int64
		given  string
		want   string // cluster name, or the error code
		moved  bool
	}{
		{"no cluster on the record, none given: the environment's", []Cluster{env, b}, nil, "", "default", false},
		{"no cluster on the record, the environment's given", []Cluster{env, b}, nil, "default", "default", false},
		{"no cluster on the record, another given: a move from the environment's", []Cluster{env, b}, nil, "rack2", "rack2", true},
		{"the record's cluster, none given", []Cluster{env, b}, id(2), "", "rack2", false},
		{"the record's cluster given", []Cluster{env, b}, id(2), "rack2", "rack2", false},
		{"the record in another cluster than given: a move", []Cluster{env, b}, id(2), "default", "default", true},
		{"an unknown cluster given", []Cluster{env, b}, nil, "rack9", string(apperr.NotFound), false},
		{"no environment's cluster, two registered, none given", []Cluster{b, c}, nil, "", string(apperr.InvalidInput), false},
		{"no environment's cluster, one registered", []Cluster{b}, nil, "", "rack2", false},
	} {
		t.Run(k.name, func(t *testing.T) {
			got, err := OfRecord(k.all, "m1", k.record, k.given)
			var moved *MovedError
			if errors.As(err, &moved) {
				if !k.moved || got.Name != k.want || moved.To.Name != k.want {
					t.Fatalf("a move to %s (%v), want %s moved=%t", got.Name, err, k.want, k.moved)
				}
				return
			}
			if k.moved {
				t.Fatalf("got %s %v, want a move", got.Name, err)
			}
			if err != nil {
				if string(apperr.CodeOf(err)) != k.want {
					t.Fatalf("got %s %v, want %s", apperr.CodeOf(err), err, k.want)
				}
				return
			}
			if got.Name != k.want {
				t.Fatalf("got %s, want %s", got.Name, k.want)
			}
		})
	}
}

// A record that names no cluster counts for the environment's cluster, and for no other:
// Unassigned says which, OfRecord and References.Counted follow it.
func TestRecordsNamingNoClusterCountForTheEnvironments(t *testing.T) {
	env, reg := Cluster{ID: 1, Name: "default", FromEnvironment: true}, Cluster{ID: 2, Name: "rack2"}
	if c, ok := Unassigned([]Cluster{reg, env}); !ok || c.ID != 1 {
		t.Fatalf("Unassigned with the environment's: %v %v", c, ok)
	}
	if _, ok := Unassigned([]Cluster{reg}); ok {
		t.Fatal("Unassigned without the environment's")
	}
	refs := References{MachineRecords: 2, UnassignedRecords: 3}
	if got := refs.Counted(env, []Cluster{env, reg}); got.MachineRecords != 5 || got.UnassignedRecords != 0 {
		t.Fatalf("the environment's: %+v", got)
	}
	if got := refs.Counted(reg, []Cluster{env, reg}); got.MachineRecords != 2 {
		t.Fatalf("another: %+v", got)
	}
	if got := refs.Counted(reg, []Cluster{reg}); got.MachineRecords != 2 {
		t.Fatalf("no environment's cluster: %+v", got)
	}
	if c, err := OfRecord([]Cluster{env, reg}, "m1", nil, ""); err != nil || c.ID != 1 {
		t.Fatalf("OfRecord of a record naming none: %v %v", c, err)
	}
}
