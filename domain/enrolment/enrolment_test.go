package enrolment

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/clusters"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

type secret string

func (s secret) Reveal() string { return string(s) }

type fakeIncus struct {
	snap    membership.Snapshot
	keys    []ConfigKey
	issued  []string
	revoked []string
	removed []string
	held    map[string][]string // instances on each member
	through string              // the member URL Apelora talks through
	seeds   []string
}

func (f *fakeIncus) Through() (string, []string) { return f.through, f.seeds }

func (f *fakeIncus) Snapshot(context.Context) (*membership.Snapshot, error) { return &f.snap, nil }
func (f *fakeIncus) IssueJoinToken(_ context.Context, name string) (IssuedToken, error) {
	f.issued = append(f.issued, name)
	return IssuedToken{Name: name, ExpiresAt: time.Unix(2000000000, 0), Token: secret("TOKEN-" + name)}, nil
}
func (f *fakeIncus) RevokeJoinToken(_ context.Context, name string) error {
	f.revoked = append(f.revoked, name)
	return nil
}
func (f *fakeIncus) MemberConfigKeys(context.Context) ([]ConfigKey, error) { return f.keys, nil }
func (f *fakeIncus) InstancesOn(_ context.Context, member string) ([]string, error) {
	return f.held[member], nil
}
func (f *fakeIncus) RemoveMember(_ context.Context, name string, _ bool) error {
	f.removed = append(f.removed, name)
	return nil
}

type fakeStore struct {
	commitErr error
	ended     []string
	// cluster is the cluster the records name (nil: none); set, what SetRecordCluster wrote.
	cluster *int64
	set     []int64
}

func (s *fakeStore) SetRecordCluster(_ context.Context, _ string, cluster int64) error {
	s.set = append(s.set, cluster)
	return nil
}

func (s *fakeStore) EndAdmission(_ context.Context, machine string) error {
	s.ended = append(s.ended, machine)
	return nil
}

func (s *fakeStore) Audited(ctx context.Context, _ string, fn func(context.Context) error) error {
	if err := fn(ctx); err != nil {
		return err
	}
	return s.commitErr
}

func (s *fakeStore) Record(_ context.Context, name string) (*machines.Record, error) {
	if name == "unknown" {
		return nil, nil
	}
	return &machines.Record{Name: name, Cluster: s.cluster}, nil
}

var clusterKeys = []ConfigKey{
	{Entity: "storage-pool", Name: "local", Key: "source", Reference: "/var/lib/incus/storage-pools/local"},
	{Entity: "storage-pool", Name: "tank", Key: "zfs.pool_name", Reference: "tank"},
	{Entity: "network", Name: "uplink", Key: "parent", Reference: "eno1"},
	{Entity: "network", Name: "bgp", Key: "bgp.ipv4.nexthop", Reference: "10.0.0.1"},
}

func TestMemberConfig(t *testing.T) {
	got, err := MemberConfig(clusterKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "storage-pool/local/source= storage-pool/tank/zfs.pool_name=tank network/uplink/parent=eno1 network/bgp/bgp.ipv4.nexthop="
	if s := strings.Join(configDetail(got), " "); s != want {
		t.Fatalf("got  %s\nwant %s", s, want)
	}
	got, err = MemberConfig(clusterKeys, []ConfigValue{{"storage-pool", "local", "source", "/dev/sdb"}})
	if err != nil || got[0].Value != "/dev/sdb" {
		t.Fatalf("override: %v %v", got, err)
	}
	for _, bad := range [][]ConfigValue{
		{{"storage-pool", "nope", "source", "x"}},
		{{"storage-pool", "local", "source", "a"}, {"storage-pool", "local", "source", "b"}},
		{{"storage-pool", "local", "source", "a\nb"}},
	} {
		if _, err := MemberConfig(clusterKeys, bad); !apperr.Is(err, apperr.InvalidInput) {
			t.Errorf("%v accepted: %v", bad, err)
		}
	}
}

func TestApprove(t *testing.T) {
	f := &fakeIncus{keys: clusterKeys}
	st := &fakeStore{}
	s := &Service{Ports: portsOf[Incus](f), Clusters: testClusters, Store: st}
	a := &audit.Action{Name: "approveEnrolment"}
	got, err := s.Approve(audit.WithAction(context.Background(), a), "node-3", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A new join begins: the name's old admission, if any, ends; the record, which named
	// no cluster, names the environment's it joins.
	if len(st.ended) != 1 || st.ended[0] != "node-3" {
		t.Fatalf("admissions ended %v", st.ended)
	}
	if len(st.set) != 1 || st.set[0] != 1 || got.Cluster.Name != "default" || got.MovedFrom != nil {
		t.Fatalf("record's cluster set %v, approval in %+v", st.set, got.Cluster)
	}
	if got.Token.Reveal() != "TOKEN-node-3" || len(got.MemberConfig) != 4 {
		t.Fatalf("%+v", got)
	}
	ev := fmt.Sprint(a.Event(audit.Succeeded, ""))
	if strings.Contains(ev, "TOKEN") || !strings.Contains(ev, "joinTokenExpiresAt") {
		t.Fatalf("audit event %s", ev)
	}
	cmd := Command("https://apelora.example:8080", got)
	if !strings.HasPrefix(cmd, "curl -fsSL -o enrol-member.sh https://apelora.example:8080/enrol/enrol-member.sh && sh enrol-member.sh --name node-3") ||
		!strings.Contains(cmd, "--member-config storage-pool/local/source=") || strings.Contains(cmd, "TOKEN") {
		t.Fatalf("command %s", cmd)
	}
}

func TestApproveRefusals(t *testing.T) {
	f := &fakeIncus{keys: clusterKeys}
	f.snap.Members = []membership.Member{{Name: "node-1"}}
	f.snap.Pending = []membership.PendingJoin{{Name: "node-2", ExpiresAt: time.Now()}}
	s := &Service{Ports: portsOf[Incus](f), Clusters: testClusters, Store: &fakeStore{}}
	for name, code := range map[string]apperr.Code{"node-1": apperr.FailedPrecondition, "node-2": apperr.FailedPrecondition, "unknown": apperr.NotFound, "Bad!": apperr.InvalidInput} {
		if _, err := s.Approve(context.Background(), name, "", nil); !apperr.Is(err, code) {
			t.Errorf("%s: %v, want %s", name, err, code)
		}
	}
	if len(f.issued) != 0 {
		t.Fatalf("tokens issued on refusal: %v", f.issued)
	}
}

// An approval whose outcome cannot be recorded sends nothing more after its change: its
// intent is in the trail, and the reconciler records what Incus shows (a pending token,
// with the advice to revoke it). Revoking it outside the change would be a step no audit
// event covers.
func TestApproveSendsNothingOutsideItsChange(t *testing.T) {
	f := &fakeIncus{keys: clusterKeys}
	s := &Service{Ports: portsOf[Incus](f), Clusters: testClusters, Store: &fakeStore{commitErr: errors.New("audit insert failed")}}
	if _, err := s.Approve(context.Background(), "node-3", "", nil); err == nil {
		t.Fatal("approved without a recorded approval")
	}
	if len(f.issued) != 1 || len(f.revoked) != 0 {
		t.Fatalf("issued %v revoked %v", f.issued, f.revoked)
	}
}

func TestRevokeAndRemove(t *testing.T) {
	f := &fakeIncus{}
	f.snap.Members = []membership.Member{{Name: "node-1", Status: "Online"}}
	f.snap.Pending = []membership.PendingJoin{{Name: "node-2"}}
	st := &fakeStore{}
	s := &Service{Ports: portsOf[Incus](f), Clusters: testClusters, Store: st}
	ctx := context.Background()
	if err := s.Revoke(ctx, "node-2"); err != nil || len(f.revoked) != 1 {
		t.Fatalf("revoke: %v %v", err, f.revoked)
	}
	if err := s.Revoke(ctx, "node-1"); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("revoke without token: %v", err)
	}
	if err := s.Remove(ctx, "node-2", false); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("remove non-member: %v", err)
	}
	if err := s.Remove(ctx, "node-1", false); err != nil || len(f.removed) != 1 || len(st.ended) != 1 || st.ended[0] != "node-1" {
		t.Fatalf("remove: %v, removed %v, admissions ended %v", err, f.removed, st.ended)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"storage-pool/local/source=": "storage-pool/local/source=",
		"network/n/parent=eth 0":     "'network/n/parent=eth 0'",
		"a'b":                        `'a'\''b'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestUserDataRunsTheScriptWithTheTokenOnStandardInput(t *testing.T) {
	a := &Approval{Name: "node-3", Token: secret("eyJzZXJ2ZXJfbmFtZSI6Im5vZGUtMyJ9"), ExpiresAt: time.Unix(2000000000, 0),
		Addresses: []string{"10.0.0.5:8443", "10.0.0.6:8443"}, MemberConfig: []ConfigValue{{"storage-pool", "local", "source", ""}}}
	ud, err := UserData([]byte("#!/bin/sh\necho enrol\n"), a)
	if err != nil {
		t.Fatal(err)
	}
	s := string(ud)
	for _, want := range []string{
		"#!/bin/sh\n",
		"cat >\"$dir/enrol-member.sh\" <<'APELORA_ENROL_SCRIPT'\n#!/bin/sh\necho enrol\nAPELORA_ENROL_SCRIPT\n",
		"ip -o route get 10.0.0.5 ",
		`sh "$dir/enrol-member.sh" --name node-3 --address "$address:8443" --member-config storage-pool/local/source= <<'APELORA_JOIN_TOKEN'` + "\neyJzZXJ2ZXJfbmFtZSI6Im5vZGUtMyJ9\nAPELORA_JOIN_TOKEN\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("user data lacks %q:\n%s", want, s)
		}
	}
	check := exec.Command("sh", "-n")
	check.Stdin = strings.NewReader(s)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("user data is not valid sh: %v\n%s", err, out)
	}
	if strings.Count(s, "eyJzZXJ2ZXJfbmFtZSI6Im5vZGUtMyJ9") != 1 {
		t.Error("the token appears more than once (it belongs only on the script's standard input)")
	}
	if _, err := UserData([]byte("x\nAPELORA_JOIN_TOKEN\n"), a); err == nil {
		t.Error("a script that would end the here-document was accepted")
	}
}

// A plan shows (and its hash covers) the user data as what the administrator approves:
// the same script, template, member and member config show the same whatever token and
// expiry are filled in at deploy, and anything else shows otherwise.
func TestShownUserDataIsWhatIsApprovedNeverTheTokenOrItsExpiry(t *testing.T) {
	script := []byte("#!/bin/sh\necho enrol\n")
	approval := func(token string, expires time.Time) *Approval {
		return &Approval{Name: "node-3", Token: secret(token), ExpiresAt: expires,
			Addresses: []string{"10.0.0.5:8443"}, MemberConfig: []ConfigValue{{"storage-pool", "local", "source", "/dev/sdb"}}}
	}
	a := approval("eyJzZXJ2ZXJfbmFtZSI6Im5vZGUtMyJ9", time.Unix(2000000000, 0))
	shown, err := ShownUserData(script, a)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := ShownUserData(script, approval("eyJvdGhlci10b2tlbiJ9", time.Unix(2000000001, 0)))
	if shown != again {
		t.Fatalf("another token and expiry show otherwise:\n%s\n%s", shown, again)
	}
	for _, want := range []string{TemplateSHA256(), "node-3", "10.0.0.5", "storage-pool/local/source=/dev/sdb", digest(script)} {
		if !strings.Contains(shown, want) {
			t.Errorf("shown user data lacks %q: %s", want, shown)
		}
	}
	if strings.Contains(shown, "eyJ") || strings.Contains(shown, "2033") {
		t.Errorf("shown user data holds the token or its expiry: %s", shown)
	}
	other := approval("eyJzZXJ2ZXJfbmFtZSI6Im5vZGUtMyJ9", time.Unix(2000000000, 0))
	other.MemberConfig[0].Value = "/dev/sdc"
	for what, got := range map[string]func() (string, error){
		"another script":        func() (string, error) { return ShownUserData([]byte("#!/bin/sh\necho other\n"), a) },
		"another member config": func() (string, error) { return ShownUserData(script, other) },
	} {
		if s, err := got(); err != nil || s == shown {
			t.Errorf("%s shows the same user data (%v)", what, err)
		}
	}
	// The template the hash names is the one the user data is made from.
	ud, _ := UserData(script, a)
	if !strings.HasPrefix(string(ud), strings.SplitN(userDataTemplate, "%", 2)[0]) {
		t.Error("the user data does not start as its template does")
	}
}

// Two clusters, each with its own Incus: the token comes from the cluster named (or the
// record's), and a record moves only while its machine is not enrolled where it is.
func TestApproveInTheClusterNamed(t *testing.T) {
	env := &fakeIncus{keys: clusterKeys, snap: membership.Snapshot{Members: []membership.Member{{Name: "node-1", Status: membership.StatusOnline}}}}
	rack2 := &fakeIncus{keys: clusterKeys[:1]}
	two := listed{{ID: 1, Name: "default", Adopted: true, FromEnvironment: true}, {ID: 2, Name: "rack2", Adopted: true}}
	byID := clusters.PortsFunc[Incus](func(_ context.Context, id int64) (Incus, error) {
		if id == 2 {
			return rack2, nil
		}
		return env, nil
	})
	id := func(n int64) *int64 { return &n }

	// A record that names no cluster, approved into rack2: a move from the environment's,
	// shown in the plan's fact and the audit event; the token is rack2's.
	st := &fakeStore{}
	s := &Service{Ports: byID, Clusters: two, Store: st}
	a := &audit.Action{Name: "approveEnrolment"}
	rec := plan.For("approveEnrolment", map[string]any{"name": "node-3", "cluster": "rack2"})
	got, err := s.Approve(plan.With(audit.WithAction(context.Background(), a), rec), "node-3", "rack2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rack2.issued) != 1 || len(env.issued) != 0 || got.Cluster.Name != "rack2" || got.MovedFrom == nil || got.MovedFrom.Name != "default" || len(got.MemberConfig) != 1 {
		t.Fatalf("issued in rack2 %v, in default %v; approval %+v", rack2.issued, env.issued, got)
	}
	if len(st.set) != 1 || st.set[0] != 2 {
		t.Fatalf("record's cluster set %v, want [2]", st.set)
	}
	facts := fmt.Sprint(rec.Plan().Facts)
	if !strings.Contains(facts, "cluster of node-3 rack2 (the record named no cluster, which counts for default)") {
		t.Fatalf("plan facts %s", facts)
	}
	if ev := fmt.Sprint(a.Event(audit.Succeeded, "")); !strings.Contains(ev, "rack2") || !strings.Contains(ev, "movedFrom") {
		t.Fatalf("audit event %s", ev)
	}

	// The record names rack2: left out, the cluster is rack2, and nothing moves.
	st = &fakeStore{cluster: id(2)}
	s = &Service{Ports: byID, Clusters: two, Store: st}
	if got, err := s.Approve(context.Background(), "node-4", "", nil); err != nil || got.Cluster.Name != "rack2" || got.MovedFrom != nil || len(st.set) != 0 {
		t.Fatalf("the record's cluster: %+v %v, set %v", got, err, st.set)
	}

	// node-1 is a member of the environment's cluster: it cannot move to rack2.
	s = &Service{Ports: byID, Clusters: two, Store: &fakeStore{}}
	if _, err := s.Approve(context.Background(), "node-1", "rack2", nil); !apperr.Is(err, apperr.FailedPrecondition) || !strings.Contains(err.Error(), "member of cluster default") {
		t.Fatalf("a member moved: %v", err)
	}
	// An unknown cluster: NOT_FOUND on field cluster, naming those there are; nothing issued.
	before := len(rack2.issued) + len(env.issued)
	_, err = s.Approve(context.Background(), "node-5", "rack9", nil)
	if e, ok := apperr.As(err); !ok || e.Code != apperr.NotFound || e.Field != "cluster" || !strings.Contains(e.Message, "registered are default, rack2") {
		t.Fatalf("an unknown cluster: %v", err)
	}
	if len(rack2.issued)+len(env.issued) != before {
		t.Fatal("a token was issued for an unknown cluster")
	}
}
