package market_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// Temporary: latency by category.
func BenchmarkDiag(b *testing.B) {
	if os.Getenv("DIAG") == "" {
		b.Skip()
	}
	n := 100_000
	m := newPlaceMarket(n)
	e := market.NewEngine(market.Config{})
	e.Advance(now)
	for _, nd := range m.nodes {
		e.UpsertNode(nd)
	}
	held := 0
	var fifo []*idlegrid.Lease
	for _, l := range m.leases {
		e.AddLease(l)
		held += len(l.GPUUUIDs)
		fifo = append(fifo, l)
	}
	target := held
	clock := now
	e.Advance(clock)
	var all []sample
	seq := 0
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		adv := false
		if i%1000 == 0 {
			clock = clock.Add(10 * time.Second)
			e.Advance(clock)
			adv = true
		}
		j := m.jobs[i%len(m.jobs)]
		tp := time.Now()
		d := e.Place(j, clock)
		tpd := time.Since(tp)
		cat := ""
		switch {
		case d.Placed():
			cat = "placed"
		case len(d.Preemptions) > 0:
			cat = "preempt"
		case d.Reservation != nil:
			cat = "reserve"
		default:
			cat = "reason"
		}
		if j.Nodes > 1 {
			cat += "/gang"
		}
		if len(j.Datasets) > 0 {
			cat += "/data"
		}
		if j.ReliabilityWeight == 0.5 {
			cat += "/w.5"
		}
		if j.RegionPreferred {
			cat += "/pref"
		}
		if adv {
			cat = "ADVANCE"
		}
		_ = tpd
		if d.Placed() {
			e.Commit(j, d, clock)
			for _, p := range d.Picks {
				seq++
				started := clock
				l := &idlegrid.Lease{ID: "bench-" + strconv.Itoa(seq), JobID: j.ID, NodeID: p.Node.ID,
					Tier: j.Tier, State: idlegrid.LeaseRunning, CreatedAt: clock, StartedAt: &started, LimitSeconds: j.DurationSeconds}
				for _, g := range p.GPUs {
					l.GPUUUIDs = append(l.GPUUUIDs, g.UUID)
				}
				e.AddLease(l)
				fifo = append(fifo, l)
				held += len(l.GPUUUIDs)
			}
		} else {
			e.Commit(j, d, clock)
		}
		for held > target && len(fifo) > 0 {
			e.RemoveLease(fifo[0].ID)
			held -= len(fifo[0].GPUUUIDs)
			fifo = fifo[1:]
		}
		all = append(all, sample{time.Since(t0), cat})
	}
	if b.N < 10000 {
		return
	}
	ds := make([]time.Duration, len(all))
	for i, s := range all {
		ds[i] = s.d
	}
	slices.Sort(ds)
	p99 := ds[len(ds)*99/100]
	by := map[string][]time.Duration{}
	over := map[string]int{}
	tot := map[string]time.Duration{}
	for _, s := range all {
		by[s.cat] = append(by[s.cat], s.d)
		tot[s.cat] += s.d
		if s.d >= p99 {
			over[s.cat]++
		}
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	fmt.Printf("N=%d p99=%v mean=%v\n", len(ds), p99, sum/time.Duration(len(ds)))
	var cats []string
	for c := range by {
		cats = append(cats, c)
	}
	slices.Sort(cats)
	for _, c := range cats {
		l := by[c]
		slices.Sort(l)
		fmt.Printf("%-28s n=%6.2f%% time=%5.1f%% p50=%7.1fµs p90=%7.1fµs p99=%8.1fµs max=%9.1fµs over-p99=%5.1f%%\n", c,
			100*float64(len(l))/float64(len(ds)), 100*float64(tot[c])/float64(sum),
			float64(l[len(l)/2])/1e3, float64(l[len(l)*9/10])/1e3, float64(l[len(l)*99/100])/1e3, float64(l[len(l)-1])/1e3, 100*float64(over[c])/float64(len(ds)/100))
	}
}

type sample struct {
	d   time.Duration
	cat string
}

