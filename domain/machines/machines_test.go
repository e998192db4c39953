package machines

import (
	"context"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/internal/apperr"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"a", "node-1", "rack3-node07", strings.Repeat("a", 63), "a1b2"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "1node", "-node", "node-", "Node", "node_1", "node.1", "nöde", strings.Repeat("a", 64), "a b"} {
		err := ValidateName(bad)
		e, ok := apperr.As(err)
		if !ok || e.Code != apperr.InvalidInput || e.Field != "name" {
			t.Errorf("%q accepted or unclear: %v", bad, err)
		}
	}
}

type memStore struct {
	records map[string]Record
}

type memTx struct{ s *memStore }

func (t memTx) InsertRecord(_ context.Context, r Record) error {
	if _, dup := t.s.records[r.Name]; dup {
		return apperr.New(apperr.AlreadyExists, "dup")
	}
	t.s.records[r.Name] = r
	return nil
}

func (t memTx) DeleteRecord(_ context.Context, name string) (bool, error) {
	_, ok := t.s.records[name]
	delete(t.s.records, name)
	return ok, nil
}

func (t memTx) SetHardwareUUID(_ context.Context, name, systemID, uuid string) (bool, error) {
	r, ok := t.s.records[name]
	if !ok || r.MAASSystemID != systemID || r.HardwareUUID != "" {
		return false, nil
	}
	r.HardwareUUID = uuid
	t.s.records[name] = r
	return true, nil
}

// Change applies fn to a copy and keeps it only on success, as a transaction would.
func (s *memStore) Change(_ context.Context, _ string, fn func(Tx) error) error {
	work := &memStore{records: map[string]Record{}}
	for k, v := range s.records {
		work.records[k] = v
	}
	if err := fn(memTx{work}); err != nil {
		return err
	}
	s.records = work.records
	return nil
}

func (s *memStore) Record(_ context.Context, name string) (*Record, error) {
	r, ok := s.records[name]
	if !ok {
		return nil, nil
	}
	return &r, nil
}

func (s *memStore) Records(context.Context) ([]Record, error) { return nil, nil }

type snapshot membership.Snapshot

func (s *snapshot) Snapshot(context.Context) (*membership.Snapshot, error) {
	return (*membership.Snapshot)(s), nil
}

type maasLookup map[string]string

func (m maasLookup) HardwareUUID(_ context.Context, id string) (string, error) {
	u, ok := m[id]
	if !ok {
		return "", apperr.New(apperr.NotFound, "no MAAS machine %s", id)
	}
	return u, nil
}

func TestRegisterAndUnregister(t *testing.T) {
	st := &memStore{records: map[string]Record{}}
	snap := &snapshot{Members: []membership.Member{{Name: "member-1"}}, Pending: []membership.PendingJoin{{Name: "pending-1"}}}
	s := &Service{Store: st, Membership: snap}
	ctx := context.Background()
	for _, n := range []string{"node-1", "member-1", "pending-1"} {
		if _, err := s.Register(ctx, "alice", Registration{Name: n, Provisioner: Manual}); err != nil {
			t.Fatal(err)
		}
	}
	if r := st.records["node-1"]; r.RegisteredBy != "alice" || r.RegisteredAt.IsZero() {
		t.Fatalf("record %+v", r)
	}
	if _, err := s.Register(ctx, "alice", Registration{Name: "node-2", Provisioner: MAAS, MAASSystemID: "abc123"}); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("MAAS machine without MAAS configured: %v", err)
	}
	s.MAAS = maasLookup{"abc123": "4c4c4544-0042"}
	r, err := s.Register(ctx, "alice", Registration{Name: "node-2", Provisioner: MAAS, MAASSystemID: "abc123"})
	if err != nil || r.HardwareUUID != "4c4c4544-0042" {
		t.Fatalf("MAAS machine: %+v %v", r, err)
	}
	if _, err := s.Register(ctx, "alice", Registration{Name: "node-3", Provisioner: MAAS, MAASSystemID: "zzz999"}); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("unknown MAAS machine: %v", err)
	}
	// A machine MAAS has only discovered has no UUID yet: it registers all the same, and
	// the UUID is copied once when MAAS reports it.
	s.MAAS = maasLookup{"abc123": "4c4c4544-0042", "new0001": ""}
	r, err = s.Register(ctx, "alice", Registration{Name: "node-4", Provisioner: MAAS, MAASSystemID: "new0001"})
	if err != nil || r.HardwareUUID != "" {
		t.Fatalf("New MAAS machine: %+v %v", r, err)
	}
	if ok, err := s.CopyHardwareUUID(ctx, "node-4", "other01", "4c4c4544-0044", "req"); ok || err != nil {
		t.Fatalf("copied from another system id: %v %v", ok, err)
	}
	if ok, err := s.CopyHardwareUUID(ctx, "node-4", "new0001", "4c4c4544-0044", "req"); !ok || err != nil || st.records["node-4"].HardwareUUID != "4c4c4544-0044" {
		t.Fatalf("first copy: %v %v %+v", ok, err, st.records["node-4"])
	}
	if ok, err := s.CopyHardwareUUID(ctx, "node-4", "new0001", "4c4c4544-0045", "req"); ok || err != nil || st.records["node-4"].HardwareUUID != "4c4c4544-0044" {
		t.Fatalf("second copy: %v %v %+v", ok, err, st.records["node-4"])
	}

	if err := s.Unregister(ctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unregister(ctx, "node-1"); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("twice: %v", err)
	}
	for _, n := range []string{"member-1", "pending-1"} {
		if err := s.Unregister(ctx, n); !apperr.Is(err, apperr.FailedPrecondition) {
			t.Fatalf("%s: %v", n, err)
		}
		if _, kept := st.records[n]; !kept {
			t.Fatalf("%s: refused unregister still deleted the record", n)
		}
	}
}
