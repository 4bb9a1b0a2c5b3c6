package agent_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
)

// fakeServer is an in-memory server for agent tests. Its zero value is
// ready. Like the real one, it derives commands from its leases' states, so
// they repeat until the agent's reports make them moot; it records every
// call, and fails calls on demand.
type fakeServer struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	nodeID   string
	nodeIDs  []string // every SetNodeID
	joins    []idlegrid.JoinRequest
	offers   []idlegrid.OfferRequest
	beats    []idlegrid.HeartbeatRequest
	beatAt   []time.Time // when each of beats came
	reports  []fakeReport
	logs     map[string][]idlegrid.LogLine
	receipts map[string][]idlegrid.Receipt // by lease, as accepted
	refuse   func(idlegrid.Receipt) error  // when set, refuses the receipts it returns an error for
	leases   map[string]*fakeLease
	failures map[string][]error     // method → errors for its next calls
	refused  error                  // when set, every call fails with it: the server refuses the node
	down     map[string]bool        // methods that fail as with the server unreachable (setDown)
	calls    map[string][]time.Time // method → when it was called
	// reportsBeforeGoodbye is how many lease reports came before the
	// last Goodbye.
	reportsBeforeGoodbye int
}

type fakeReport struct {
	LeaseID string
	idlegrid.LeaseReport
}

type fakeLease struct {
	lease idlegrid.Lease
	job   idlegrid.JobSpec
	auth  *idlegrid.RegistryAuth // the start command's
}

var _ agent.Server = (*fakeServer)(nil)

// fail makes the next calls of method return errs, one each.
func (f *fakeServer) fail(method string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures == nil {
		f.failures = map[string][]error{}
	}
	f.failures[method] = append(f.failures[method], errs...)
}

// refuseNode makes every call fail with err from now on (nil: none), as
// a server that retired the node, or does not know it, answers.
func (f *fakeServer) refuseNode(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused = err
}

// setDown makes every call of the methods fail, from now on, as with the
// server out of reach; the others work. No methods: all work again.
func (f *fakeServer) setDown(methods ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = map[string]bool{}
	for _, m := range methods {
		f.down[m] = true
	}
}

// call records a call of method and returns the error it must fail with.
// f.mu is held.
func (f *fakeServer) call(method string) error {
	if f.calls == nil {
		f.calls = map[string][]time.Time{}
	}
	f.calls[method] = append(f.calls[method], time.Now())
	if f.refused != nil {
		return f.refused
	}
	if f.down[method] {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the server cannot be reached")
	}
	if errs := f.failures[method]; len(errs) > 0 {
		f.failures[method] = errs[1:]
		return errs[0]
	}
	return nil
}

// notify wakes long polls. f.mu is held.
func (f *fakeServer) notify() {
	if f.changed != nil {
		close(f.changed)
	}
	f.changed = make(chan struct{})
}

// assign places a lease on the node.
func (f *fakeServer) assign(l idlegrid.Lease, job idlegrid.JobSpec) {
	f.assignWithLogin(l, job, nil)
}

// assignWithLogin assigns a lease whose start command carries auth.
func (f *fakeServer) assignWithLogin(l idlegrid.Lease, job idlegrid.JobSpec, auth *idlegrid.RegistryAuth) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leases == nil {
		f.leases = map[string]*fakeLease{}
	}
	l.State = idlegrid.LeaseAssigned
	f.leases[l.ID] = &fakeLease{lease: l, job: job, auth: auth}
	f.notify()
}

// setState puts a lease in state s, as the server's own decisions do (a
// lease an agent reported running, or one the server gave up on).
func (f *fakeServer) setState(id string, s idlegrid.LeaseState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases[id].lease.State = s
	f.notify()
}

// requestStop asks the agent to stop a lease, as a renter's cancel does.
func (f *fakeServer) requestStop(id, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases[id].lease.StopRequested = reason
	f.notify()
}

func (f *fakeServer) lease(id string) idlegrid.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leases[id].lease
}

func (f *fakeServer) reportsFor(id string) []idlegrid.LeaseReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []idlegrid.LeaseReport
	for _, r := range f.reports {
		if r.LeaseID == id {
			out = append(out, r.LeaseReport)
		}
	}
	return out
}

func (f *fakeServer) logsFor(id string) []idlegrid.LogLine {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]idlegrid.LogLine(nil), f.logs[id]...)
}

func (f *fakeServer) callTimes(method string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls[method]...)
}

func (f *fakeServer) counts() (joins, offers, beats int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.joins), len(f.offers), len(f.beats)
}

func (f *fakeServer) heartbeats() []idlegrid.HeartbeatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]idlegrid.HeartbeatRequest(nil), f.beats...)
}

// heartbeatTimes returns when each of heartbeats came.
func (f *fakeServer) heartbeatTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.beatAt...)
}

func (f *fakeServer) Join(ctx context.Context, req idlegrid.JoinRequest) (*idlegrid.JoinResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("Join"); err != nil {
		return nil, err
	}
	f.joins = append(f.joins, req)
	f.nodeID = fmt.Sprintf("node_%d", len(f.joins))
	return &idlegrid.JoinResponse{NodeID: f.nodeID, ProviderID: "acct_provider", HeartbeatSeconds: 5}, nil
}

func (f *fakeServer) SetNodeID(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodeID = id
	f.nodeIDs = append(f.nodeIDs, id)
}

func (f *fakeServer) UpdateOffer(ctx context.Context, req idlegrid.OfferRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("UpdateOffer"); err != nil {
		return err
	} else if f.nodeID == "" {
		return idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "unsigned request")
	}
	f.offers = append(f.offers, req)
	return nil
}

func (f *fakeServer) Heartbeat(ctx context.Context, req idlegrid.HeartbeatRequest) (*idlegrid.HeartbeatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("Heartbeat"); err != nil {
		return nil, err
	}
	f.beats, f.beatAt = append(f.beats, req), append(f.beatAt, time.Now())
	resp := &idlegrid.HeartbeatResponse{HeartbeatSeconds: 5}
	var ids []string
	for _, st := range req.Starting {
		ids = append(ids, st.LeaseID)
	}
	for _, p := range req.Leases {
		ids = append(ids, p.LeaseID)
	}
	for _, id := range ids { // as the server tells of leases it ended
		if fl := f.leases[id]; fl != nil && fl.lease.State.Terminal() {
			resp.Ended = append(resp.Ended, idlegrid.EndedLease{LeaseID: id, State: fl.lease.State, Reason: fl.lease.Reason})
		}
	}
	return resp, nil
}

// Commands answers at once when there is something to do, else waits for a
// change, wait, or ctx.
func (f *fakeServer) Commands(ctx context.Context, wait time.Duration) ([]idlegrid.Command, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		f.mu.Lock()
		if err := f.call("Commands"); err != nil {
			f.mu.Unlock()
			return nil, err
		}
		cmds := f.commands()
		if f.changed == nil {
			f.changed = make(chan struct{})
		}
		changed := f.changed
		f.mu.Unlock()
		if len(cmds) > 0 {
			return cmds, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// commands derives the commands from the leases, as the server does.
// f.mu is held.
func (f *fakeServer) commands() []idlegrid.Command {
	ids := make([]string, 0, len(f.leases))
	for id := range f.leases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var cmds []idlegrid.Command
	for _, id := range ids {
		fl := f.leases[id]
		l, job := fl.lease, fl.job
		switch {
		case l.State.Terminal():
		case l.StopRequested != "":
			cmds = append(cmds, idlegrid.Command{Kind: idlegrid.CommandStop, Lease: &l, Reason: l.StopRequested})
		case l.State == idlegrid.LeaseAssigned:
			cmds = append(cmds, idlegrid.Command{Kind: idlegrid.CommandStart, Lease: &l, Job: &job, RegistryAuth: fl.auth})
		}
	}
	return cmds
}

func (f *fakeServer) ReportLease(ctx context.Context, leaseID string, r idlegrid.LeaseReport) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ReportLease"); err != nil {
		return err
	}
	fl := f.leases[leaseID]
	switch {
	case fl == nil:
		return idlegrid.Errorf(idlegrid.ENOTFOUND, "lease %s not found", leaseID)
	case fl.lease.State.Terminal():
		return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s already %s", leaseID, fl.lease.State)
	case r.State == idlegrid.LeaseRunning && fl.lease.State != idlegrid.LeaseAssigned && fl.lease.State != idlegrid.LeaseRunning:
		return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s is %s", leaseID, fl.lease.State)
	}
	f.reports = append(f.reports, fakeReport{leaseID, r})
	fl.lease.State, fl.lease.Progress, fl.lease.ExitCode = r.State, r.Progress, r.ExitCode
	fl.lease.Fault, fl.lease.Reason = r.Fault, r.Message
	if r.State == idlegrid.LeaseCancelled && fl.lease.StopRequested == "" {
		fl.lease.State, fl.lease.Fault = idlegrid.LeaseFailed, idlegrid.FaultProvider
	}
	f.notify()
	return nil
}

// Goodbye notes the call, and how many lease reports came before it; the
// fake keeps no node state.
func (f *fakeServer) Goodbye(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reportsBeforeGoodbye = len(f.reports)
	return f.call("Goodbye")
}

// SendReceipts accepts receipts in sequence, as the server does: one it
// has is a no-op when unchanged and refused when changed; the next must
// chain to the last and start after it ends; an ended lease takes none.
// Nothing of a refused batch is kept.
func (f *fakeServer) SendReceipts(ctx context.Context, leaseID string, rs []idlegrid.Receipt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("SendReceipts"); err != nil {
		return err
	}
	if fl := f.leases[leaseID]; fl == nil {
		return idlegrid.Errorf(idlegrid.ENOTFOUND, "lease %s not found", leaseID)
	} else if fl.lease.State.Terminal() {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s already %s", leaseID, fl.lease.State)
	}
	if f.receipts == nil {
		f.receipts = map[string][]idlegrid.Receipt{}
	}
	have := f.receipts[leaseID]
	for _, r := range rs {
		n := int64(len(have))
		switch {
		case r.Seq >= 1 && r.Seq <= n && have[r.Seq-1].Hash() == r.Hash():
		case r.Seq >= 1 && r.Seq <= n:
			return idlegrid.Invalid("receipt.seq", "receipt %d was already accepted with other contents", r.Seq)
		case r.Seq != n+1:
			return idlegrid.Invalid("receipt.seq", "receipt %d is out of sequence: the next is %d", r.Seq, n+1)
		case n > 0 && (r.PrevHash != have[n-1].Hash() || r.Start.Before(have[n-1].End)):
			return idlegrid.Invalid("receipt.prev_hash", "receipt %d does not follow receipt %d", r.Seq, n)
		case f.refuse != nil && f.refuse(r) != nil:
			return f.refuse(r)
		default:
			have = append(have, r)
		}
	}
	f.receipts[leaseID] = have
	return nil
}

// LastReceipt returns the last receipt the lease has, or nil.
func (f *fakeServer) LastReceipt(ctx context.Context, leaseID string) (*idlegrid.Receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("LastReceipt"); err != nil {
		return nil, err
	}
	if f.leases[leaseID] == nil {
		return nil, idlegrid.Errorf(idlegrid.ENOTFOUND, "lease %s not found", leaseID)
	}
	have := f.receipts[leaseID]
	if len(have) == 0 {
		return nil, nil
	}
	last := have[len(have)-1]
	return &last, nil
}

func (f *fakeServer) receiptsFor(id string) []idlegrid.Receipt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]idlegrid.Receipt(nil), f.receipts[id]...)
}

func (f *fakeServer) AppendLogs(ctx context.Context, leaseID string, b idlegrid.LogBatch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("AppendLogs"); err != nil {
		return err
	} else if len(b.Lines) > 1000 {
		return idlegrid.Invalid("logs.lines", "at most 1000 lines per batch")
	}
	if f.logs == nil {
		f.logs = map[string][]idlegrid.LogLine{}
	}
	f.logs[leaseID] = append(f.logs[leaseID], b.Lines...)
	return nil
}
