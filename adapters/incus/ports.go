package incus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/enrolment"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/flight"
)

// Ports adapts the Incus REST client to what the domain packages ask of Incus, and
// turns Incus's errors into administrator's errors.
type Ports struct {
	c *Client
	// shared: the whole-cluster reads every fleet read makes, one in flight at a time
	// for all callers (make Ports with NewPorts).
	shared *sharedReads
}

// sharedReads are the Incus reads concurrent callers share (internal/flight): the member
// list and the pending join tokens. Every answer is as fresh as the call it shared.
type sharedReads struct {
	members flight.Call[[]Member]
	pending flight.Call[[]PendingJoinToken]
}

// NewPorts makes the ports on c. Every change through c, made or planned, passes c's
// seam (plan.Writes), and then has the shared reads forget their call in flight
// (Client.AfterWrite): no port write can forget to, and a write to another cluster, through
// its own client, leaves this cluster's shared reads be.
func NewPorts(c *Client) *Ports {
	p := &Ports{c: c, shared: &sharedReads{}}
	c.AfterWrite(p.wrote)
	return p
}

func (p Ports) members(ctx context.Context) ([]Member, error) {
	return p.shared.members.Do(ctx, p.c.Members)
}

// wrote runs after every write (the seam's hook): a read after the write starts a new
// call rather than share one that began before it.
func (p Ports) wrote() {
	p.shared.members.Forget()
	p.shared.pending.Forget()
}

func (p Ports) pendingJoinTokens(ctx context.Context) ([]PendingJoinToken, error) {
	return p.shared.pending.Do(ctx, p.c.PendingJoinTokens)
}

var (
	_ membership.Source = Ports{}
	_ fleet.IncusMember = Ports{}
	_ admission.Incus   = Ports{}
	_ admission.Members = Ports{}
	_ enrolment.Incus   = Ports{}
	_ placement.Incus   = Ports{}
)

// within says how long a call waited: "within 10s" for a call that ran out of its own
// bound (the request timeout), "in time" when the caller's context ended first.
func within(err error) string {
	var it *TimeoutError
	if errors.As(err, &it) {
		return "within " + it.After.String()
	}
	return "in time"
}

// incusErr names what was being done; Incus's own message says why it failed. Its advice
// names the environment's settings (APELORA_INCUS_*): incusErrIn names a registered
// cluster's record instead.
func incusErr(err error, doing string) error { return incusErrIn(nil, err, doing) }

// incusErrIn is incusErr for the cluster c reaches.
func incusErrIn(c *Client, err error, doing string) error {
	if err == nil {
		return nil
	}
	name := ""
	if c != nil {
		name = c.name
	}
	var ie *Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &ie):
		if name != "" {
			return apperr.Wrap(err, apperr.Unavailable, "Incus cluster %s did not answer %s while trying to %s: check that its members are up (clusters { addresses } lists those Apelora reaches it through; if Incus was only slow, it may still carry the step out: look at the machine before trying again), or raise APELORA_REQUEST_TIMEOUT", name, within(err), doing)
		}
		return apperr.Wrap(err, apperr.Unavailable, "Incus did not answer %s while trying to %s: check that the member at APELORA_INCUS_URL (or APELORA_INCUS_SOCKET) and the cluster are up (if Incus was only slow, it may still carry the step out: look at the machine before trying again), or raise APELORA_REQUEST_TIMEOUT", within(err), doing)
	case IsNotFound(err):
		msg := "not found"
		if errors.As(err, &ie) {
			msg = ie.Message
		}
		return apperr.Wrap(err, apperr.NotFound, "cannot %s: Incus says %s", doing, msg)
	case IsPreconditionFailed(err):
		return apperr.Wrap(err, apperr.Busy, "cannot %s: the member changed in Incus meanwhile; run the step again", doing)
	case IsForbidden(err) || errors.Is(err, ErrUntrusted):
		if name != "" {
			return apperr.Wrap(err, apperr.Unavailable, "cannot %s: Incus cluster %s does not trust Apelora's client certificate (APELORA_INCUS_CLIENT_CERT; the incusClientCertificate query shows it): trust it on a member with `incus config trust add-certificate`", doing, name)
		}
		return apperr.Wrap(err, apperr.Unavailable, "cannot %s: Incus does not trust Apelora's client certificate (APELORA_INCUS_CLIENT_CERT); trust it with `incus config trust add-certificate`", doing)
	case errors.Is(err, ErrCertificateMismatch):
		if name != "" {
			var pe *PinError
			presented := "another certificate"
			if errors.As(err, &pe) && pe.Presented != "" {
				presented = "certificate " + pe.Presented + ", not the registered " + pe.Pinned
			}
			return apperr.Wrap(err, apperr.Unavailable, "cannot %s: a member reached for Incus cluster %s presented %s: it is no member of that cluster (any more); check clusters { addresses }", doing, name, presented)
		}
		return apperr.Wrap(err, apperr.Unavailable, "cannot %s: the Incus server certificate does not match APELORA_INCUS_SERVER_CERT", doing)
	case errors.As(err, &ie):
		return apperr.Wrap(err, apperr.FailedPrecondition, "Incus refused to %s: %s", doing, ie.Message)
	default:
		if name != "" {
			return apperr.Wrap(err, apperr.Unavailable, "Incus cluster %s could not be reached through any of its members while trying to %s: check that they are up, or clusters { addresses }", name, doing)
		}
		return apperr.Wrap(err, apperr.Unavailable, "Incus could not be reached while trying to %s: check APELORA_INCUS_URL (or APELORA_INCUS_SOCKET) and that the cluster is up", doing)
	}
}

func toMember(m Member) membership.Member {
	return membership.Member{
		Name: m.ServerName, URL: m.URL, Status: memberStatus(m.Status), Message: m.Message,
		Architecture: m.Architecture, FailureDomain: m.FailureDomain, Description: m.Description,
		Roles: m.Roles, Groups: m.Groups, Config: m.Config,
	}
}

// memberStatus is the one place Incus's member status strings become the domain's.
func memberStatus(s string) membership.Status {
	switch s {
	case MemberOnline:
		return membership.StatusOnline
	case MemberOffline:
		return membership.StatusOffline
	case MemberEvacuated:
		return membership.StatusEvacuated
	case MemberBlocked:
		return membership.StatusBlocked
	}
	return membership.StatusUnknown
}

// withPending reads the members (read) and the pending join tokens at the same time: a
// snapshot costs the slower call, not the sum.
func (p Ports) withPending(ctx context.Context, read func(s *membership.Snapshot) error) (*membership.Snapshot, error) {
	type answer struct {
		tokens []PendingJoinToken
		err    error
	}
	pendingDone := make(chan answer, 1)
	go func() {
		t, err := p.pendingJoinTokens(ctx)
		pendingDone <- answer{t, err}
	}()
	s := &membership.Snapshot{}
	if err := read(s); err != nil {
		return nil, err
	}
	// Listing operations asks every member; a hung one must not hide the members too
	// (the call is bounded by the request timeout, like every other).
	a := <-pendingDone
	p.addPending(s, a.tokens, a.err)
	return s, nil
}

func (p Ports) Snapshot(ctx context.Context) (*membership.Snapshot, error) {
	return p.withPending(ctx, func(s *membership.Snapshot) error {
		ms, err := p.members(ctx)
		if err != nil {
			return incusErrIn(p.c, err, "list the cluster members")
		}
		s.Members = make([]membership.Member, 0, len(ms))
		for _, m := range ms {
			s.Members = append(s.Members, toMember(m))
		}
		return nil
	})
}

// addPending puts the pending join tokens in s, or says why they could not be listed.
func (p Ports) addPending(s *membership.Snapshot, pending []PendingJoinToken, err error) {
	if err != nil {
		s.PendingProblem = apperr.PublicMessage(incusErrIn(p.c, err, "list the pending join tokens"))
		return
	}
	now := time.Now()
	for _, t := range pending {
		// Incus sweeps expired tokens once a minute; until then they block nothing.
		if !t.ExpiresAt.IsZero() && t.ExpiresAt.Before(now) {
			continue
		}
		s.Pending = append(s.Pending, membership.PendingJoin{Name: t.ServerName, ExpiresAt: t.ExpiresAt})
	}
}

// MemberSnapshot is one name's side of Incus for the fleet's one-machine read: that member
// (GET /1.0/cluster/members/{name}, none when Incus knows no such member) and the pending
// join tokens, asked at the same time.
func (p Ports) MemberSnapshot(ctx context.Context, name string) (*membership.Snapshot, error) {
	return p.withPending(ctx, func(s *membership.Snapshot) error {
		m, _, err := p.c.Member(ctx, name)
		switch {
		case IsNotFound(err):
			return nil
		case err != nil:
			return incusErrIn(p.c, err, "read member "+name)
		}
		s.Members = []membership.Member{toMember(m)}
		return nil
	})
}

func (p Ports) Members(ctx context.Context) ([]membership.Member, error) {
	ms, err := p.members(ctx)
	if err != nil {
		return nil, incusErrIn(p.c, err, "list the cluster members")
	}
	out := make([]membership.Member, len(ms))
	for i, m := range ms {
		out[i] = toMember(m)
	}
	return out, nil
}

// MemberAnswers is nil once the member is back for the cluster's purposes: its own API
// answers (GET /1.0 at its URL, asked directly, pinned like every call) and so does the
// read the incus-version admission check makes through the cluster (GET /1.0?target=).
// Both are needed (seen live on 6.0.4): the cluster may list a member before it answers,
// and a member that answers itself may be unreachable through the others for seconds after
// it came back: forwarded reads then answer "Server isn't ready yet" (or "Missing event
// connection with target cluster member"), as they do for a member that is down.
func (p Ports) MemberAnswers(ctx context.Context, name string) error {
	m, _, err := p.c.Member(ctx, name)
	if err != nil {
		return incusErrIn(p.c, err, "read member "+name)
	}
	if _, err := p.c.AskMember(ctx, m.URL); err != nil {
		if IsNotReady(err) {
			return notReady(err, name, 0)
		}
		return incusErrIn(p.c, err, "ask member "+name+" itself ("+m.URL+") for its version")
	}
	if _, err := p.c.ServerInfo(ctx, name); err != nil {
		if IsNotReady(err) {
			return notReady(err, name, 0)
		}
		return incusErrIn(p.c, err, "ask member "+name+" for its version through the cluster")
	}
	return nil
}

// notReady is the error for a member Incus answers "Server isn't ready yet" for: the
// member itself is starting, or the member asked through cannot reach it yet (or at all).
func notReady(err error, member string, waited time.Duration) error {
	if waited > 0 {
		return apperr.Wrap(err, apperr.Unavailable, "Incus answered %q for member %s, also after %s of asking again (APELORA_REQUEST_TIMEOUT): the member is starting, or the cluster cannot reach it yet; check it, then run the step again", NotReadyMessage, member, waited.Round(time.Second))
	}
	return apperr.Wrap(err, apperr.Unavailable, "Incus answered %q for member %s: it is starting, or the cluster cannot reach it yet", NotReadyMessage, member)
}

// notReadyPoll is how often a read that met a starting member asks again.
const notReadyPoll = 500 * time.Millisecond

// serverInfo reads GET /1.0 of member ("" the member talked to). When Incus answers "Server
// isn't ready yet" for a member whose own API answers (one back from a power cycle, which
// the others cannot reach for seconds yet), it asks again until they can, within one
// request timeout; for a member that does not answer itself (down), at once.
func (p Ports) serverInfo(ctx context.Context, member string) (ServerInfo, error) {
	began := time.Now()
	for {
		s, err := p.c.ServerInfo(ctx, member)
		if !IsNotReady(err) || member == "" {
			return s, err
		}
		if !p.answersItself(ctx, member) {
			return s, notReady(err, member, 0)
		}
		if time.Since(began)+notReadyPoll > p.c.Timeout() {
			return s, notReady(err, member, time.Since(began))
		}
		select {
		case <-ctx.Done():
			return s, notReady(err, member, time.Since(began))
		case <-time.After(notReadyPoll):
		}
	}
}

// answersItself reports whether the member's own API answers (asked at its URL).
func (p Ports) answersItself(ctx context.Context, member string) bool {
	m, _, err := p.c.Member(ctx, member)
	if err != nil {
		return false
	}
	_, err = p.c.AskMember(ctx, m.URL)
	return err == nil
}

func (p Ports) Version(ctx context.Context, member string) (membership.Version, error) {
	s, err := p.serverInfo(ctx, member)
	if err != nil {
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return membership.Version{}, err
		}
		who := "the cluster"
		if member != "" {
			who = "member " + member
		}
		return membership.Version{}, incusErrIn(p.c, err, "read the versions of "+who)
	}
	return membership.Version{
		Incus: s.ServerVersion, APIExtensions: s.APIExtensions, Kernel: s.KernelVersion,
		OS: strings.TrimSpace(s.OSName + " " + s.OSVersion),
	}, nil
}

func (p Ports) StoragePools(ctx context.Context) ([]string, error) {
	ps, err := p.c.StoragePools(ctx)
	if err != nil {
		return nil, incusErrIn(p.c, err, "list the storage pools")
	}
	out := make([]string, len(ps))
	for i, s := range ps {
		out[i] = s.Name
	}
	return out, nil
}

func (p Ports) StoragePoolStatus(ctx context.Context, pool, member string) (string, error) {
	s, err := p.c.StoragePool(ctx, pool, member)
	if err != nil {
		return "", incusErrIn(p.c, err, "read storage pool "+pool+" on "+member)
	}
	return s.Status, nil
}

// LocatedNetworks are the managed networks that exist on each member. OVN networks live
// in OVN, not on members, so they have no locations and are not checked per member.
func (p Ports) LocatedNetworks(ctx context.Context) ([]string, error) {
	ns, err := p.c.ManagedNetworks(ctx)
	if err != nil {
		return nil, incusErrIn(p.c, err, "list the networks")
	}
	var out []string
	for _, n := range ns {
		if len(n.Locations) > 0 && n.Type != "ovn" {
			out = append(out, n.Name)
		}
	}
	return out, nil
}

func (p Ports) NetworkStatus(ctx context.Context, network, member string) (string, error) {
	n, err := p.c.Network(ctx, network, member)
	if err != nil {
		return "", incusErrIn(p.c, err, "read network "+network+" on "+member)
	}
	return n.Status, nil
}

func (p Ports) Member(ctx context.Context, name string) (membership.Member, string, error) {
	m, etag, err := p.c.Member(ctx, name)
	if err != nil {
		return membership.Member{}, "", incusErrIn(p.c, err, "read member "+name)
	}
	return toMember(m), etag, nil
}

func (p Ports) UpdateMember(ctx context.Context, m membership.Member, etag string) error {
	put := MemberPut{Config: m.Config, Description: m.Description, Roles: m.Roles, FailureDomain: m.FailureDomain, Groups: m.Groups}
	if put.Config == nil {
		put.Config = map[string]string{}
	}
	return incusErrIn(p.c, p.c.UpdateMember(ctx, m.Name, put, etag), "update member "+m.Name)
}

func (p Ports) PlacementScriptlet(ctx context.Context) (string, string, error) {
	v, etag, err := p.c.PlacementScriptlet(ctx)
	return v, etag, incusErrIn(p.c, err, "read the placement scriptlet ("+placement.ScriptletKey+")")
}

func (p Ports) SetPlacementScriptlet(ctx context.Context, value, etag string) error {
	err := p.c.SetPlacementScriptlet(ctx, value, etag)
	if IsPreconditionFailed(err) {
		return apperr.Wrap(err, apperr.Busy, "cannot set the placement scriptlet: the Incus server configuration changed meanwhile; run the step again")
	}
	return incusErrIn(p.c, err, "set the placement scriptlet ("+placement.ScriptletKey+")")
}

func (p Ports) IssueJoinToken(ctx context.Context, name string) (enrolment.IssuedToken, error) {
	t, err := p.c.IssueJoinToken(ctx, name)
	if err != nil {
		return enrolment.IssuedToken{}, incusErrIn(p.c, err, "issue a join token for "+name)
	}
	return enrolment.IssuedToken{Name: t.ServerName, ExpiresAt: t.ExpiresAt, Addresses: t.Addresses, Token: t, Planned: !t.Issued()}, nil
}

func (p Ports) RevokeJoinToken(ctx context.Context, name string) error {
	return incusErrIn(p.c, p.c.RevokeJoinToken(ctx, name), "revoke the join token for "+name)
}

func (p Ports) RemoveMember(ctx context.Context, name string, force bool) error {
	// When it is the member Apelora talks through, the client sends the removal, and every
	// call after it, through another member (Client.DeleteMember).
	return incusErrIn(p.c, p.c.DeleteMember(ctx, name, force), "remove member "+name)
}

// Through is the member Apelora talks through and the configured URLs (enrolment.Incus).
func (p Ports) Through() (string, []string) { return p.c.Through(), p.c.Seeds() }

// InstancesOn names the instances on member, of every project, in one Incus call.
func (p Ports) InstancesOn(ctx context.Context, member string) ([]string, error) {
	ins, err := p.c.InstancesOn(ctx, member)
	if err != nil {
		return nil, incusErrIn(p.c, err, "list the instances on member "+member)
	}
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.Name
		if in.Project != "" && in.Project != "default" {
			out[i] = in.Project + "/" + in.Name
		}
	}
	return out, nil
}

// MemberConfigKeys lists the member-specific keys a joiner supplies, with the value the
// member Apelora talks to uses for each (read per pool or network with a target).
func (p Ports) MemberConfigKeys(ctx context.Context) ([]enrolment.ConfigKey, error) {
	ci, err := p.c.Cluster(ctx)
	if err != nil {
		return nil, incusErrIn(p.c, err, "read the cluster's member configuration keys")
	}
	refs := map[string]map[string]string{}
	var out []enrolment.ConfigKey
	for _, k := range ci.MemberConfig {
		id := k.Entity + "/" + k.Name
		cfg, ok := refs[id]
		if !ok {
			switch k.Entity {
			case "storage-pool":
				sp, err := p.c.StoragePool(ctx, k.Name, ci.ServerName)
				if err != nil {
					return nil, incusErrIn(p.c, err, "read storage pool "+k.Name)
				}
				cfg = sp.Config
			case "network":
				n, err := p.c.Network(ctx, k.Name, ci.ServerName)
				if err != nil {
					return nil, incusErrIn(p.c, err, "read network "+k.Name)
				}
				cfg = n.Config
			}
			refs[id] = cfg
		}
		out = append(out, enrolment.ConfigKey{Entity: k.Entity, Name: k.Name, Key: k.Key, Description: k.Description, Reference: cfg[k.Key]})
	}
	return out, nil
}

// MemberHardware is Incus's view of a member's hardware, as hardware profiles count it.
func (p Ports) MemberHardware(ctx context.Context, member string) (hardware.Inventory, error) {
	r, err := p.c.Resources(ctx, member)
	if err != nil {
		return hardware.Inventory{}, incusErrIn(p.c, err, "read the hardware of member "+member)
	}
	return incusInventory(r), nil
}

// incusInventory counts disks that hold data (not optical, removable, read-only or empty
// drives: a card reader or a virtual DVD is no disk) and every port of every network card.
func incusInventory(r Resources) hardware.Inventory {
	inv := hardware.Inventory{Architecture: r.Architecture, CPUCores: r.CPUs, MemoryMiB: int(r.MemoryBytes >> 20)}
	for _, d := range r.Disks {
		if d.Removable || d.ReadOnly || d.SizeBytes <= 0 || d.Type == "cdrom" {
			continue
		}
		inv.Disks = append(inv.Disks, hardware.Disk{Name: d.ID, SizeBytes: d.SizeBytes})
	}
	for _, c := range r.NetworkCards {
		if len(c.Ports) == 0 {
			// A card whose driver reports no ports is still one NIC, of unknown speed.
			inv.NICs = append(inv.NICs, hardware.NIC{Name: c.PCIAddress})
		}
		for _, port := range c.Ports {
			inv.NICs = append(inv.NICs, hardware.NIC{Name: port.ID, SpeedMbps: port.LinkSpeedMbps})
		}
	}
	return inv
}

// FencePorts reads member statuses and the server configuration for the fence worker and
// the cluster view, through the Incus client (which reaches the cluster through any member:
// the one a worker talks to may be the one that died).
// FencePorts is what the fencing worker asks of Incus: the members as it observes them
// (quorum loss told apart from an outage) and the server config it checks its limits
// against. It shares nothing with Ports: the worker reads on its own schedule.
type FencePorts struct{ c *Client }

// NewFencePorts makes the fencing worker's ports on c.
func NewFencePorts(c *Client) FencePorts { return FencePorts{c: c} }

var (
	_ fencing.Cluster       = FencePorts{}
	_ fencing.ClusterConfig = FencePorts{}
)

func (f FencePorts) Observe(ctx context.Context) ([]fencing.Observation, error) {
	ms, err := f.c.Members(ctx)
	if err != nil {
		if f.noQuorum(ctx, err) {
			return nil, fmt.Errorf("list the Incus members: %w (%w)", fencing.ErrNoQuorum, err)
		}
		return nil, fmt.Errorf("list the Incus members: %w", err)
	}
	out := make([]fencing.Observation, 0, len(ms))
	for _, m := range ms {
		out = append(out, fencing.Observation{Name: m.ServerName, Status: memberStatus(m.Status), Message: m.Message, Roles: m.Roles, FailureDomain: m.FailureDomain, Groups: m.Groups})
	}
	return out, nil
}

// noQuorum tells a member list that failed for want of quorum from one that found no member
// up: the list needs Incus's database, GET /1.0 does not. On 6.0.4 without quorum the list
// answered 500 "context deadline exceeded" after 5 s (or nothing within the request
// timeout) while GET /1.0 answered at once (seen live, two of three voters hung).
func (f FencePorts) noQuorum(ctx context.Context, err error) bool {
	var ie *Error
	switch {
	case errors.As(err, &ie) && ie.Status < 500:
		return false // refused (trust, …): not the database
	case !errors.As(err, &ie) && !errors.Is(err, context.DeadlineExceeded):
		return false // nobody answered: reachability, not quorum
	}
	if ctx.Err() != nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, f.c.Timeout())
	defer cancel()
	_, perr := f.c.ServerInfo(pctx, "")
	return perr == nil
}

func (f FencePorts) ServerConfig(ctx context.Context) (map[string]string, error) {
	cfg, err := f.c.GetServerConfig(ctx)
	if err != nil {
		return nil, incusErrIn(f.c, err, "read the cluster configuration")
	}
	return cfg, nil
}

// AllInstances lists every instance of every project in one Incus call (maintenance).
func (p Ports) AllInstances(ctx context.Context) ([]maintenance.Instance, error) {
	all, err := p.c.AllInstances(ctx)
	if err != nil {
		return nil, incusErrIn(p.c, err, "list the instances")
	}
	out := make([]maintenance.Instance, len(all))
	for i, in := range all {
		out[i] = maintenance.Instance{Project: in.Project, Name: in.Name, Type: in.Type, Status: in.Status,
			Location: in.Location, Evacuate: in.Evacuate, Origin: in.Origin}
	}
	return out, nil
}

// ChangeMemberState asks Incus to evacuate or restore a member; Incus's operation id.
func (p Ports) ChangeMemberState(ctx context.Context, name, action, mode string) (string, error) {
	id, err := p.c.ChangeMemberState(ctx, name, action, mode)
	return id, incusErrIn(p.c, err, action+" member "+name)
}

// MemberOperation reads an evacuation or restore operation; found is false once Incus
// no longer lists it (it keeps finished operations a few seconds).
func (p Ports) MemberOperation(ctx context.Context, id string) (maintenance.IncusOperation, bool, error) {
	op, err := p.c.MemberOperation(ctx, id)
	if IsNotFound(err) {
		return maintenance.IncusOperation{}, false, nil
	}
	if err != nil {
		return maintenance.IncusOperation{}, false, incusErrIn(p.c, err, "read operation "+id)
	}
	return maintenance.IncusOperation{Done: op.Final(), Failed: op.StatusCode >= StatusFailure, Err: op.Err, Progress: op.Progress}, true, nil
}
