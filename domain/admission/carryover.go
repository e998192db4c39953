package admission

import (
	"context"
	"errors"
	"maps"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/lifecycle"
	"github.com/apelora/fabric/internal/apperr"
)

// Admissions recorded before members carried the admission mark were carried over from
// the audit trail (migration 0008) and flagged: the lifecycle counts such an admission as
// admitted without the mark until the member carries it. Placement rules in Incus test for
// the mark itself, so the server marks those members at start.

// MigrationActor is the actor of the audit events of marking carried-over admissions: a
// change the server makes on its own, in no administrator's name.
const MigrationActor = "apelora (migration)"

// MarkAction names the audit event of marking a carried-over admission's member.
const MarkAction = "markAdmission"

// CarriedOver is an admission carried over from the audit trail whose member is not
// marked yet.
type CarriedOver struct {
	Machine   string
	ID        int64
	RequestID string // of the admission, as the trail recorded it
}

// CarriedOverStore is what marking carried-over admissions needs from the database.
type CarriedOverStore interface {
	// CarriedOver lists the open admissions carried over from the trail. The flag is a
	// fact of the admission and stays once its member is marked: a fleet read whose
	// Incus answer predates the mark, and whose database answer follows it, must still
	// find the member admitted (a cleared flag made it UNHELD for that read).
	CarriedOver(ctx context.Context) ([]CarriedOver, error)
}

// errNothingToMark ends a marking change without writing anything, audit event included.
var errNothingToMark = errors.New("nothing to mark")

// MarkCarriedOver puts the admission mark on the member of every carried-over admission,
// each in an audited change of its own (actor MigrationActor, action MarkAction, request
// requestID): one member update re-sending every writable field with the mark added,
// guarded by the ETag just read. A member that is held, gone, or already carries another
// mark is left as it is (the phase says what it is). It returns how many it marked.
func (s *Service) MarkCarriedOver(ctx context.Context, store CarriedOverStore, requestID string) (int, error) {
	if s.Members == nil {
		return 0, apperr.NotConfigured(apperr.Incus)
	}
	todo, err := store.CarriedOver(ctx)
	if err != nil {
		return 0, err
	}
	marked := 0
	for _, c := range todo {
		act := &audit.Action{Actor: MigrationActor, Name: MarkAction, Machine: c.Machine, RequestID: requestID,
			Parameters: map[string]any{AdmissionDetail: c.ID}}
		err := s.Store.Audited(audit.WithAction(ctx, act), c.Machine, func(ctx context.Context) error {
			open, err := s.Store.OpenAdmission(ctx, c.Machine)
			if err != nil {
				return err
			}
			if open == nil || open.ID != c.ID || !open.CarriedOver {
				return errNothingToMark // ended or marked meanwhile
			}
			// The member is marked in its record's cluster (a carried-over record's is the
			// environment's).
			rec, err := s.Store.Record(ctx, c.Machine)
			if err != nil {
				return err
			}
			_, _, members, err := s.in(ctx, c.Machine, rec)
			if err != nil {
				return err
			}
			member, etag, err := members.Member(ctx, c.Machine)
			if apperr.Is(err, apperr.NotFound) {
				return errNothingToMark
			}
			if err != nil {
				return err
			}
			if _, marked := member.Config[lifecycle.AdmissionKey]; marked || member.Held() {
				return errNothingToMark
			}
			put := member
			put.Config = maps.Clone(member.Config)
			if put.Config == nil {
				put.Config = map[string]string{}
			}
			put.Config[lifecycle.AdmissionKey] = lifecycle.AdmissionMark(c.ID, c.RequestID)
			act.Detail(AdmissionDetail, c.ID)
			return members.UpdateMember(ctx, put, etag)
		})
		switch {
		case errors.Is(err, errNothingToMark):
		case err != nil:
			return marked, err
		default:
			marked++
		}
	}
	return marked, nil
}
