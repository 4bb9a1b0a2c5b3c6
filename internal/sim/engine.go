package sim

import (
	"strconv"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// engineMatcher drives internal/market.Engine, the server's own engine,
// the way internal/server's scheduler does: nodes are upserted with their
// offers, leases added and removed as they start, get notice and end, and
// each pass begins with Advance.
type engineMatcher struct {
	w       *world
	r       *replay
	e       *market.Engine
	nodes   []*idlegrid.Node // the offer each world node publishes
	removed []bool           // no windows left: taken out of the engine
	byID    map[string]int32
	varying bool // some node asks differently per window
}

var _ matcher = (*engineMatcher)(nil)

func newEngineMatcher(w *world) *engineMatcher {
	m := &engineMatcher{w: w, byID: make(map[string]int32, len(w.nodes))}
	for _, n := range w.nodes {
		m.varying = m.varying || n.asks != nil
	}
	return m
}

func (m *engineMatcher) byTier() bool       { return true }
func (m *engineMatcher) wantsWindows() bool { return m.varying }

func at(secs int64) time.Time { return time.Unix(secs, 0).UTC() }

// seconds rounds a time up to a whole second.
func seconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

func (m *engineMatcher) start(r *replay) {
	m.r = r
	m.e = market.NewEngine(m.w.cfg.Market)
	m.e.Advance(at(r.now))
	m.nodes = make([]*idlegrid.Node, len(m.w.nodes))
	m.removed = make([]bool, len(m.w.nodes))
	for i, sn := range m.w.nodes {
		n := &idlegrid.Node{ID: sn.id, ProviderID: "provider-" + sn.id, State: idlegrid.NodeOnline}
		n.Name, n.Region, n.Residency = sn.id, sn.region, sn.residency
		for g := range sn.gpus {
			n.GPUs = append(n.GPUs, idlegrid.GPU{UUID: sn.id + "/" + strconv.Itoa(g), Model: sn.model, VRAMMB: sn.vramMB})
		}
		n.Schedule.Mode = idlegrid.ScheduleWindows
		m.nodes[i] = n
		m.byID[sn.id] = int32(i)
		m.publish(r.nodes[i], r.now)
	}
}

// publishAhead is how far ahead a node's published windows reach: two
// days, so that a daily republish always overlaps.
const publishAhead = 2 * republishEvery

// publish upserts a node with its record and the windows that start
// within publishAhead; a node with none left is removed.
func (m *engineMatcher) publish(ns *nodeState, now int64) {
	sn := ns.n
	i := sn.idx
	if m.removed[i] {
		return
	}
	n := m.nodes[i]
	n.Reliability = ns.reliability()
	n.Schedule.OneOff = n.Schedule.OneOff[:0]
	first, next := -1, -1
	for k, s := range sn.windows {
		if s.end <= now {
			continue
		}
		if next < 0 {
			next = k
		}
		if s.start >= now+publishAhead {
			break
		}
		if first < 0 {
			first = k
		} else if sn.asks != nil && sn.askAt(k) != sn.askAt(first) {
			break // the next ask is published when its window opens
		}
		n.Schedule.OneOff = append(n.Schedule.OneOff, idlegrid.OneOffWindow{Start: at(s.start), End: at(s.end)})
	}
	if next < 0 { // no window left
		m.removed[i] = true
		m.e.RemoveNode(n.ID)
		return
	}
	if first < 0 {
		first = next
	}
	ask := sn.askAt(first)
	n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{
		idlegrid.TierGold: floorOf(ask, idlegrid.TierGold), idlegrid.TierSilver: ask, idlegrid.TierBronze: floorOf(ask, idlegrid.TierBronze),
	}
	m.e.UpsertNode(n)
}

func (m *engineMatcher) republish(now int64) {
	for _, ns := range m.r.nodes {
		m.publish(ns, now)
	}
}

func (m *engineMatcher) windowOpened(ns *nodeState, w int) {
	if ns.n.asks != nil {
		m.publish(ns, m.r.now)
	}
}

func (m *engineMatcher) windowClosed(*nodeState) {}

func (m *engineMatcher) recordsChanged(ns []*nodeState) {
	for _, s := range ns {
		if !m.removed[s.n.idx] {
			m.nodes[s.n.idx].Reliability = s.reliability()
			m.e.UpsertNode(m.nodes[s.n.idx])
		}
	}
}

func (m *engineMatcher) advance(now int64) []notice {
	ns := m.e.Advance(at(now))
	if len(ns) == 0 {
		return nil
	}
	out := make([]notice, len(ns))
	for i, n := range ns {
		out[i] = notice{leaseID: n.LeaseID, stopAt: seconds(n.StopAt)}
	}
	return out
}

func (m *engineMatcher) nextEvent() int64 {
	t := m.e.NextEvent()
	if t.IsZero() {
		return 0
	}
	return seconds(t)
}

func (m *engineMatcher) queued(j *liveJob) {
	if j.eng == nil {
		spec := j.spec
		j.eng = &idlegrid.Job{
			ID: "j" + strconv.FormatInt(int64(j.idx), 36), RenterID: "renter", State: idlegrid.JobQueued,
			CreatedAt: at(j.arrived),
			JobSpec: idlegrid.JobSpec{
				Kind: idlegrid.KindOther, Image: "sim", GPUs: int(spec.gpus), Nodes: 1,
				GPUModels: m.w.modelSets[spec.models], Tier: spec.tierOf(),
				MaxPriceMicrosPerGPUHour: spec.cap, Interruptible: spec.tierOf() == idlegrid.TierBronze,
				Region: m.w.regions[spec.region], CheckpointEverySeconds: int64(spec.ckpt),
			},
		}
	}
	j.eng.DurationSeconds, j.eng.Attempts = j.remaining, j.attempts
	m.e.NoteQueued(j.eng)
}

// estimator is a matcher that can say when a waiting job should start.
type estimator interface {
	// estimateStart is when j, waiting at now, should start, in seconds;
	// 0 when it cannot say.
	estimateStart(j *liveJob, now int64) int64
}

// estimateStart is the estimated start of idlegrid job explain.
func (m *engineMatcher) estimateStart(j *liveJob, now int64) int64 {
	ex := m.e.Explain(j.eng, at(now))
	if ex.EstimatedStart.IsZero() {
		return 0
	}
	return seconds(ex.EstimatedStart)
}

func (m *engineMatcher) forget(j *liveJob) { m.e.ForgetJob(j.eng.ID) }

func (m *engineMatcher) place(j *liveJob, now int64) decision {
	d := m.e.Place(j.eng, at(now))
	out := decision{reason: d.Reason, raw: d, reserved: d.Reservation != nil}
	for _, p := range d.Picks {
		out.picks = append(out.picks, pick{node: m.byID[p.Node.ID], gpus: p.GPUs, n: len(p.GPUs), price: p.PriceMicrosPerGPUHour})
	}
	for _, p := range d.Preemptions {
		out.preempt = append(out.preempt, p.LeaseID)
	}
	return out
}

func (m *engineMatcher) commit(j *liveJob, d *decision, now int64) {
	raw := d.raw.(market.Decision)
	if raw.Placed() || raw.Reservation != nil || len(raw.Preemptions) > 0 {
		m.e.Commit(j.eng, raw, at(now))
	}
}

// lease is the store's view of l, as the coordinator hands it to AddLease.
func (m *engineMatcher) lease(l *lease) *idlegrid.Lease {
	started := at(l.start)
	il := &idlegrid.Lease{
		ID: l.id, JobID: l.job.eng.ID, NodeID: l.node.n.id, Tier: l.job.spec.tierOf(),
		State: idlegrid.LeaseRunning, CreatedAt: started, StartedAt: &started, LimitSeconds: l.end - l.start,
		PriceMicrosPerGPUHour: l.price, GPUUUIDs: make([]string, len(l.gpus)),
	}
	for i, g := range l.gpus {
		il.GPUUUIDs[i] = g.UUID
	}
	if l.noticed {
		noticeAt := at(m.r.now)
		il.NoticeAt, il.NoticeSeconds = &noticeAt, l.stopAt-m.r.now
	}
	return il
}

func (m *engineMatcher) leaseStarted(l *lease)           { m.e.AddLease(m.lease(l)) }
func (m *engineMatcher) leaseNoticed(l *lease)           { m.e.AddLease(m.lease(l)) }
func (m *engineMatcher) leaseEnded(l *lease)             { m.e.RemoveLease(l.id) }
func (m *engineMatcher) checkpoint(l *lease, secs int64) { m.e.Checkpoint(l.id, at(secs)) }
