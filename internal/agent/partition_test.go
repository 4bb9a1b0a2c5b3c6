package agent_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/market"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/runtime"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/session"
)

// TestPartition: a node cut off from the server while it runs a lease
// (every packet dropped, nothing refused, so each end finds out only by
// its own timeouts) is declared lost: the lease ends lost, the node's
// fault, charging the renter nothing, and the job runs on another node.
// Once the network heals, the node's agent reaches the server again by
// itself, hears that the lease ended, and stops its workload, which
// then earns nothing; the node is online again and takes new work.
func TestPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a lost node's heartbeats, in real time")
	}
	ctx := context.Background()
	m := mustPartitionMarket(t, server.Config{MissedHeartbeats: 3})
	cut := newPartition(t, m.url)
	a := m.startNode(t, "cut-off", "http://"+cut.addr(), nil)
	spec := job(3600, nil)
	j, err := m.renter.SubmitJob(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	first := m.waitLease(t, "the job running on the node to be cut off", j.ID, func(l *idlegrid.Lease) bool {
		return l.NodeID == a.nodeID && l.State == idlegrid.LeaseRunning
	})
	b := m.startNode(t, "reachable", m.url, nil)

	cut.cut()
	lost := m.waitLease(t, "the cut-off node's lease to end", j.ID, func(l *idlegrid.Lease) bool {
		return l.ID == first.ID && l.State.Terminal()
	})
	if lost.State != idlegrid.LeaseLost || lost.Fault != idlegrid.FaultProvider || lost.ChargedMicros != 0 {
		t.Errorf("the cut-off node's lease ended %s (fault %q, charged %s: %s); want lost, the provider's fault, nothing charged",
			lost.State, lost.Fault, lost.ChargedMicros, lost.Reason)
	}
	m.waitLease(t, "the job running on the reachable node", j.ID, func(l *idlegrid.Lease) bool {
		return l.NodeID == b.nodeID && l.State == idlegrid.LeaseRunning
	})
	if a.rt.stoppedLease(first.ID) {
		t.Fatal("the cut-off agent stopped the lease's workload before it could hear that the lease ended")
	}

	cut.heal()
	waitReal(t, "the cut-off agent to stop the ended lease's workload", func() bool { return a.rt.stoppedLease(first.ID) })
	waitReal(t, "the cut-off node online again", func() bool { return m.nodeState(t, a.nodeID) == idlegrid.NodeOnline })
	next, err := m.renter.SubmitJob(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	m.waitLease(t, "a new job running on the healed node", next.ID, func(l *idlegrid.Lease) bool {
		return l.NodeID == a.nodeID && l.State == idlegrid.LeaseRunning
	})
	if l := m.lease(t, j.ID, first.ID); l.State != idlegrid.LeaseLost || l.ChargedMicros != 0 {
		t.Errorf("after the heal the lost lease is %s, charged %s; want it lost still, and charged nothing for what ran cut off", l.State, l.ChargedMicros)
	}
	if o := a.rt.Runtime.(*gpuLedger).overlaps(); len(o) > 0 {
		t.Errorf("the healed node ran two workloads on one GPU: %s", strings.Join(o, "; "))
	}
}

// TestPartition_blip: a node cut off for less time than the server waits
// for its heartbeats is not lost: its lease runs on, its agent signs the
// receipts of the time it was cut off and sends them once it can, and the
// renter pays for the whole run, as the node's receipts prove.
func TestPartition_blip(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a lease across a cut, in real time")
	}
	ctx := context.Background()
	m := mustPartitionMarket(t, server.Config{MissedHeartbeats: 10}) // lost only after 10 s without a heartbeat
	cut := newPartition(t, m.url)
	a := m.startNode(t, "blipped", "http://"+cut.addr(), func(c *agent.Config, rt *rtfake.Runtime) {
		c.ReceiptInterval = time.Second
		rt.Speed = 100 // the job's 10 minutes run in 6 s
	})
	j, err := m.renter.SubmitJob(ctx, job(600, nil))
	if err != nil {
		t.Fatal(err)
	}
	l := m.waitLease(t, "the job running", j.ID, func(l *idlegrid.Lease) bool { return l.State == idlegrid.LeaseRunning })
	time.Sleep(time.Second)
	cutAt := time.Now()
	cut.cut()
	time.Sleep(1500 * time.Millisecond)
	cut.heal()
	healedAt := time.Now()
	l = m.waitLease(t, "the lease to end", j.ID, func(x *idlegrid.Lease) bool { return x.ID == l.ID && x.State.Terminal() })
	if l.State != idlegrid.LeaseSucceeded || l.NodeID != a.nodeID || l.Attempt != 1 {
		t.Fatalf("the lease across the cut ended %s on %s at attempt %d (%s); want it to succeed on the node cut off, its first", l.State, l.NodeID, l.Attempt, l.Reason)
	}
	rs, err := m.renter.ListReceipts(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := nodekey.ParsePublic(rs.NodePublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if errs := errors.Join(nodekey.VerifyReceiptChain(pub, l.ID, rs.GPUs, rs.Receipts)...); errs != nil {
		t.Errorf("the lease's receipts do not check: %v", errs)
	}
	during := 0
	for _, r := range rs.Receipts {
		if r.End.After(cutAt) && !r.End.After(healedAt) {
			during++
		}
	}
	if during == 0 || rs.GPUSeconds == 0 {
		t.Errorf("%d receipts (%d GPU-seconds), none ending while the node was cut off (%s to %s); want the cut-off time signed and sent later",
			len(rs.Receipts), rs.GPUSeconds, cutAt.Format(time.StampMicro), healedAt.Format(time.StampMicro))
	}
	bal, err := m.renter.Balance(ctx, m.renterAccountID)
	if err != nil {
		t.Fatal(err)
	}
	if l.ChargedMicros <= 0 || bal.Spent != l.ChargedMicros || bal.Held != 0 {
		t.Errorf("the lease charged %s; the renter spent %s and holds %s; want the run charged, and no more, nothing held", l.ChargedMicros, bal.Spent, bal.Held)
	}
}

// TestPartition_noticeAcrossABlip: a bronze lease given notice, for a
// silver job, while its node is cut off for less than the server waits
// still gets its notice: once the network heals, the agent hears of the
// stop, the bronze workload stops, and the silver job runs on the GPU
// after it, never beside it. The bronze renter pays for the run up to the
// stop.
func TestPartition_noticeAcrossABlip(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a notice across a cut, in real time")
	}
	ctx := context.Background()
	m := mustPartitionMarket(t, server.Config{MissedHeartbeats: 10, Market: market.Config{NoticeSeconds: 5, MinRuntimeSeconds: 1}})
	cut := newPartition(t, m.url)
	a := m.startNode(t, "blipped", "http://"+cut.addr(), func(c *agent.Config, _ *rtfake.Runtime) {
		c.Ask.Floor = map[idlegrid.Tier]string{idlegrid.TierSilver: "1.50", idlegrid.TierBronze: "0.50"}
	})
	bronzeSpec := job(3600, nil)
	bronzeSpec.Tier, bronzeSpec.Interruptible = idlegrid.TierBronze, true
	bronze, err := m.renter.SubmitJob(ctx, bronzeSpec)
	if err != nil {
		t.Fatal(err)
	}
	first := m.waitLease(t, "the bronze job running", bronze.ID, func(l *idlegrid.Lease) bool { return l.State == idlegrid.LeaseRunning })

	cut.cut()
	silver, err := m.renter.SubmitJob(ctx, job(60, nil))
	if err != nil {
		t.Fatal(err)
	}
	m.waitLease(t, "the bronze lease given notice", bronze.ID, func(l *idlegrid.Lease) bool { return l.ID == first.ID && l.NoticeAt != nil })
	time.Sleep(1500 * time.Millisecond)
	cut.heal()

	ran := m.waitLease(t, "the silver job running on the node", silver.ID, func(l *idlegrid.Lease) bool {
		return l.NodeID == a.nodeID && l.State == idlegrid.LeaseRunning
	})
	stopped := m.lease(t, bronze.ID, first.ID)
	if stopped.State != idlegrid.LeasePreempted || stopped.ChargedMicros <= 0 {
		t.Errorf("the bronze lease ended %s, charged %s (%s); want preempted, its run charged", stopped.State, stopped.ChargedMicros, stopped.Reason)
	}
	if !a.rt.stoppedLease(first.ID) {
		t.Error("the agent never stopped the bronze workload")
	}
	if o := a.rt.Runtime.(*gpuLedger).overlaps(); len(o) > 0 {
		t.Errorf("the silver lease %s shared the GPU: %s", ran.ID, strings.Join(o, "; "))
	}
}

// partitionMarket is the coordinator on SQLite behind a real listener,
// with sessions, a renter with funds and a provider, its agents beating
// every second.
type partitionMarket struct {
	url             string
	admin, renter   *client.Client
	provider        *client.Client
	renterAccountID string
}

// mustPartitionMarket starts a market with cfg's rules (a node lost
// after cfg.MissedHeartbeats, say), heartbeats every second.
func mustPartitionMarket(tb testing.TB, cfg server.Config) *partitionMarket {
	tb.Helper()
	ctx := context.Background()
	cfg.HeartbeatInterval, cfg.SchedulePeriod = time.Second, 50*time.Millisecond
	url, admin := mustCoordinator(tb, cfg, &session.Config{})
	m := &partitionMarket{url: url, admin: admin}
	renter, _, renterKey, err := m.admin.CreateAccount(ctx, "lab", idlegrid.RoleRenter)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := m.admin.TopUp(ctx, renter.ID, 100*idlegrid.MicrosPerUnit, "start"); err != nil {
		tb.Fatal(err)
	}
	_, _, providerKey, err := m.admin.CreateAccount(ctx, "gpus", idlegrid.RoleProvider)
	if err != nil {
		tb.Fatal(err)
	}
	m.renter, m.provider, m.renterAccountID = client.New(url, renterKey), client.New(url, providerKey), renter.ID
	return m
}

// partitionNode is a running agent with one simulated GPU.
type partitionNode struct {
	nodeID string
	rt     *stopsSeen
	stop   func() error // stops the agent, once; what Run returned
}

// startNode runs an agent that reaches the market at serverURL, its
// config and runtime changed by tune (nil: none), and waits until its
// node is online.
func (m *partitionMarket) startNode(tb testing.TB, name, serverURL string, tune func(*agent.Config, *rtfake.Runtime)) *partitionNode {
	tb.Helper()
	_, token, err := m.provider.CreateJoinToken(context.Background(), name, 1, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := testConfig(tb)
	cfg.Server, cfg.JoinToken, cfg.Name, cfg.FakeGPUs = serverURL, token, name, "1xRTX4090"
	key, err := nodekey.LoadOrCreate(cfg.KeyPath()) // the key startAgentLogging loads again
	if err != nil {
		tb.Fatal(err)
	}
	sim := &rtfake.Runtime{}
	if tune != nil {
		tune(cfg, sim)
	}
	rt := &stopsSeen{Runtime: &gpuLedger{Runtime: sim}}
	r := startAgentLogging(tb, cfg, client.NewAgent(serverURL, key), rt, func(d gpu.Detector) gpu.Detector { return d },
		namedLines{name, testOutput(tb)})
	n := &partitionNode{rt: rt, stop: sync.OnceValue(func() error { return r.stop(tb) })}
	tb.Cleanup(func() { n.stop() })
	waitReal(tb, name+" online", func() bool {
		n.nodeID = r.a.NodeID()
		return n.nodeID != "" && m.nodeState(tb, n.nodeID) == idlegrid.NodeOnline
	})
	return n
}

// namedLines writes each line of an agent's log after its node's name, so
// that the log of a market of several agents says whose each line is.
type namedLines struct {
	name string
	w    io.Writer
}

func (n namedLines) Write(p []byte) (int, error) {
	if _, err := n.w.Write(append([]byte(n.name+": "), p...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// nodeState is the node's state as the market has it ("" before it joined).
func (m *partitionMarket) nodeState(tb testing.TB, nodeID string) idlegrid.NodeState {
	tb.Helper()
	nodes, err := m.admin.ListNodes(context.Background(), idlegrid.NodeFilter{Limit: 100})
	if err != nil {
		tb.Fatal(err)
	}
	for _, n := range nodes {
		if n.ID == nodeID {
			return n.State
		}
	}
	return ""
}

// waitLease waits until one of the job's leases passes cond, and returns it.
func (m *partitionMarket) waitLease(tb testing.TB, what, jobID string, cond func(*idlegrid.Lease) bool) *idlegrid.Lease {
	tb.Helper()
	var found *idlegrid.Lease
	waitReal(tb, what, func() bool {
		leases, err := m.renter.ListLeases(context.Background(), idlegrid.LeaseFilter{JobID: jobID})
		if err != nil {
			tb.Fatal(err)
		}
		i := slices.IndexFunc(leases, cond)
		if i >= 0 {
			found = leases[i]
		}
		return i >= 0
	})
	return found
}

// lease is the job's lease of that ID.
func (m *partitionMarket) lease(tb testing.TB, jobID, leaseID string) *idlegrid.Lease {
	tb.Helper()
	return m.waitLease(tb, "lease "+leaseID, jobID, func(l *idlegrid.Lease) bool { return l.ID == leaseID })
}

// waitReal waits until cond holds, in real time: a minute at most, a
// guard against a hang, not a measure of speed.
func waitReal(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopsSeen is a runtime that notes the leases whose workloads it was
// asked to stop.
type stopsSeen struct {
	runtime.Runtime
	mu      sync.Mutex
	stopped []string
}

func (s *stopsSeen) Stop(leaseID string, grace time.Duration) error {
	s.mu.Lock()
	s.stopped = append(s.stopped, leaseID)
	s.mu.Unlock()
	return s.Runtime.Stop(leaseID, grace)
}

func (s *stopsSeen) stoppedLease(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.stopped, id)
}

// partition is a TCP proxy to a server that can cut the network between
// its clients and the server as a partition does: while cut, nothing gets
// through either way, and nothing is refused (connections are accepted,
// and what they carry dropped). Healed, new connections go through; those
// open while it was cut are closed, as a NAT that forgot them resets them.
type partition struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	isCut  bool
	conns  map[net.Conn]bool // both ends of every connection
	wg     sync.WaitGroup
}

func newPartition(tb testing.TB, serverURL string) *partition {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &partition{ln: ln, target: serverURL[len("http://"):], conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

func (p *partition) addr() string { return p.ln.Addr().String() }

// accept takes connections until the listener closes.
func (p *partition) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Go(func() { p.pipe(s, c) })
		p.wg.Go(func() { p.pipe(c, s) })
	}
}

// track notes a connection's two ends; false when the proxy is closed.
func (p *partition) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		s.Close()
		return false
	}
	p.conns[c], p.conns[s] = true, true
	return true
}

// pipe copies from src to dst, dropping what comes while the network is
// cut, until either end closes.
func (p *partition) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cutNow() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *partition) cutNow() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isCut
}

// cut drops everything from now on.
func (p *partition) cut() {
	p.mu.Lock()
	p.isCut = true
	p.mu.Unlock()
}

// heal lets new connections through, and closes every one open now.
func (p *partition) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = false
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// close stops the proxy and waits for its goroutines.
func (p *partition) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
