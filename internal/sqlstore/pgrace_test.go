package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// These tests force, on PostgreSQL, the interleaving that a read-then-
// write of the store's could lose to: a blocker transaction holds a lock
// on a row both store calls will write, so that both do their reads
// before either writes; then it lets them go. Each call must lock what it
// reads (or write conditionally), so that the second sees the first's
// write. SQLite runs write transactions one at a time, so they skip
// without PostgreSQL.

// raceRig opens a store on a fresh PostgreSQL database and a raw handle
// beside it, for the blocker.
type raceRig struct {
	db  *sqlstore.DB
	raw *sql.DB
	dsn string // for a second server's store on the same database
}

func newRig(t *testing.T) *raceRig {
	dsn := pgtest.NewDSN(t)
	db := mustOpen(t, dsn)
	raw, err := sql.Open("pgx", dsn)
	mustOK(t, err)
	t.Cleanup(func() { raw.Close() })
	return &raceRig{db, raw, dsn}
}

// block begins a transaction that runs q (a SELECT … FOR UPDATE) and
// returns its commit.
func (r *raceRig) block(t *testing.T, q string, a ...any) func() {
	tx, err := r.raw.Begin()
	mustOK(t, err)
	rows, err := tx.Query(q, a...)
	mustOK(t, err)
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	if n == 0 {
		t.Fatalf("blocker locked no row: %s", q)
	}
	return func() { mustOK(t, tx.Commit()) }
}

// waitLocked waits until n backends of this database wait for a lock.
func (r *raceRig) waitLocked(t *testing.T, n int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var k int
		mustOK(t, r.raw.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock'`).Scan(&k))
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d backends wait for a lock, want %d", k, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func goErr(wg *sync.WaitGroup, out *error, f func() error) {
	wg.Add(1)
	go func() { defer wg.Done(); *out = f() }()
}

// Two attestations from the same previous fingerprint at once: one is
// current, the other is refused as a conflict (compare again).
func TestDB_race_attestationsOneCurrent(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := mustAccount(t, r.db, idlegrid.RoleProvider)
	n := mustNode(t, r.db, p.ID, 2)
	a0 := attestationOf(n, t0, n.GPUs...)
	mustOK(t, r.db.SaveAttestation(ctx, a0, "", nil))
	a1 := attestationOf(n, at(time.Minute), n.GPUs[0])
	a2 := attestationOf(n, at(2*time.Minute), n.GPUs[1])
	a2.Fingerprint.GPUs[0].VRAMMB = 1 // differ
	a2.Hash = a2.Fingerprint.Hash()

	release := r.block(t, `SELECT hash FROM attestations WHERE node_id = $1 FOR UPDATE`, n.ID)
	var wg sync.WaitGroup
	var e1, e2 error
	goErr(&wg, &e1, func() error { return r.db.SaveAttestation(ctx, a1, a0.Hash, nil) })
	goErr(&wg, &e2, func() error { return r.db.SaveAttestation(ctx, a2, a0.Hash, nil) })
	r.waitLocked(t, 2)
	release()
	wg.Wait()
	var cur int
	mustOK(t, r.raw.QueryRow(`SELECT COUNT(*) FROM attestations WHERE node_id = $1 AND is_current`, n.ID).Scan(&cur))
	if cur != 1 {
		t.Errorf("%d current attestations for node %s", cur, n.ID)
	}
}

// Two logins to new registries at once, the account one short of the
// cap: one is kept, the cap holds.
func TestDB_race_registryLoginCap(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a := mustAccount(t, r.db, idlegrid.RoleRenter)
	login := func(reg string) *idlegrid.RegistryLogin {
		return &idlegrid.RegistryLogin{AccountID: a.ID, Registry: reg, Username: "u", Sealed: []byte("s"), CreatedAt: t0, UpdatedAt: t0}
	}
	for i := 0; i < idlegrid.MaxRegistryLogins-1; i++ {
		mustOK(t, r.db.PutRegistryLogin(ctx, login(fmt.Sprintf("r%d.example", i))))
	}
	release := r.block(t, `SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, a.ID)
	var wg sync.WaitGroup
	var e1, e2 error
	goErr(&wg, &e1, func() error { return r.db.PutRegistryLogin(ctx, login("x.example")) })
	goErr(&wg, &e2, func() error { return r.db.PutRegistryLogin(ctx, login("y.example")) })
	r.waitLocked(t, 2)
	release()
	wg.Wait()
	var k int
	mustOK(t, r.raw.QueryRow(`SELECT COUNT(*) FROM registry_logins WHERE account_id = $1`, a.ID).Scan(&k))
	if k > idlegrid.MaxRegistryLogins {
		t.Errorf("%d logins, over the cap of %d", k, idlegrid.MaxRegistryLogins)
	}
}

// An owner's schedule edit and the agent's new offer at once: neither is
// lost.
func TestDB_race_scheduleAndOffer(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := mustAccount(t, r.db, idlegrid.RoleProvider)
	n := mustNode(t, r.db, p.ID, 1)
	o2 := offer(n.ID, 4)
	o2.Name = "renamed-by-agent"
	owner := idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, TimeZone: "UTC",
		Weekly: []idlegrid.WeeklyWindow{{Days: []string{"mon"}, Start: "01:00", End: "02:00"}}}

	release := r.block(t, `SELECT id FROM nodes WHERE id = $1 FOR UPDATE`, n.ID)
	var wg sync.WaitGroup
	var e1, e2 error
	goErr(&wg, &e1, func() error { _, err := r.db.SetNodeSchedule(ctx, n.ID, &owner, at(time.Minute)); return err })
	r.waitLocked(t, 1) // SetNodeSchedule has read the old offer
	goErr(&wg, &e2, func() error { return r.db.UpdateOffer(ctx, n.ID, o2, "v2", at(time.Minute)) })
	r.waitLocked(t, 2) // UpdateOffer has read no owner schedule
	release()
	wg.Wait()
	got, err := r.db.FindNode(ctx, n.ID)
	mustOK(t, err)
	var gpuCount int
	mustOK(t, r.raw.QueryRow(`SELECT gpu_count FROM nodes WHERE id = $1`, n.ID).Scan(&gpuCount))
	if got.Name != o2.Name || len(got.GPUs) != 4 {
		t.Errorf("the agent's new offer was lost (offer has %q, %d GPUs; column gpu_count %d)", got.Name, len(got.GPUs), gpuCount)
	}
	if got.Schedule.TimeZone != "UTC" {
		t.Errorf("the owner's schedule is stored but not applied to the offer: %+v", got.Schedule)
	}
}

// An admin's quarantine and a failed challenge's at once: the challenge's
// failure is recorded (the node stays in the admin's quarantine), rather
// than its resolution failing on the one-quarantine index.
func TestDB_race_quarantineAndChallenge(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := mustAccount(t, r.db, idlegrid.RoleProvider)
	n := mustNode(t, r.db, p.ID, 1)
	c := &idlegrid.Challenge{ID: id("chl"), NodeID: n.ID, GPUUUID: n.GPUs[0].UUID, Model: "H100-80GB", VRAMMB: 81920,
		Seed: "00112233445566778899aabbccddeeff", Size: 256, Reason: idlegrid.ChallengeAtJoin, State: idlegrid.ChallengeIssued,
		MinNanos: 10, MaxNanos: 40, IssuedAt: t0, Deadline: at(10 * time.Minute)}
	mustOK(t, r.db.CreateChallenge(ctx, c))
	c.State, c.ResolvedAt, c.Findings = idlegrid.ChallengeFailed, ptr(at(time.Minute)), []string{"digest mismatch"}

	release := r.block(t, `SELECT id FROM nodes WHERE id = $1 FOR UPDATE`, n.ID)
	var wg sync.WaitGroup
	var e1, e2 error
	goErr(&wg, &e1, func() error {
		return r.db.QuarantineNode(ctx, &idlegrid.Quarantine{ID: id("qua"), NodeID: n.ID, Reason: "admin", Since: at(time.Minute)})
	})
	r.waitLocked(t, 1)
	goErr(&wg, &e2, func() error {
		_, err := r.db.ResolveChallenge(ctx, c, &idlegrid.Quarantine{ID: id("qua"), NodeID: n.ID, Reason: "failed challenge", Since: at(time.Minute)}, nil)
		return err
	})
	r.waitLocked(t, 2)
	release()
	wg.Wait()
	got, err := r.db.FindChallenge(ctx, c.ID)
	mustOK(t, err)
	if e2 != nil || got.State != idlegrid.ChallengeFailed {
		t.Errorf("the failed challenge was not recorded: %v, state %s", e2, got.State)
	}
}

// Two lifts of the same quarantine at once: one lifts it, the other is
// refused, and the log has one lift.
func TestDB_race_liftOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := mustAccount(t, r.db, idlegrid.RoleProvider)
	n := mustNode(t, r.db, p.ID, 1)
	mustOK(t, r.db.QuarantineNode(ctx, &idlegrid.Quarantine{ID: id("qua"), NodeID: n.ID, Reason: "admin", Since: t0}))
	release := r.block(t, `SELECT id FROM quarantines WHERE node_id = $1 FOR UPDATE`, n.ID)
	var wg sync.WaitGroup
	var e1, e2 error
	goErr(&wg, &e1, func() error { _, err := r.db.LiftQuarantine(ctx, n.ID, "alice", "ok", at(time.Minute)); return err })
	goErr(&wg, &e2, func() error { _, err := r.db.LiftQuarantine(ctx, n.ID, "bob", "ok", at(2*time.Minute)); return err })
	r.waitLocked(t, 2)
	release()
	wg.Wait()
	var lifts int
	mustOK(t, r.raw.QueryRow(`SELECT COUNT(*) FROM audit_entries WHERE kind LIKE '%quarantine%'`).Scan(&lifts))
	if (e1 == nil) == (e2 == nil) || lifts != 2 {
		t.Errorf("lifts: %v and %v, %d quarantine entries in the log; want one lift, one conflict, and the quarantine and its lift logged", e1, e2, lifts)
	}
}

// Two drains started at once keep the first one's start.
func TestDB_race_drainKeepsItsStart(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := mustAccount(t, r.db, idlegrid.RoleProvider)
	n := mustNode(t, r.db, p.ID, 1)
	release := r.block(t, `SELECT id FROM nodes WHERE id = $1 FOR UPDATE`, n.ID)
	var wg sync.WaitGroup
	var e1, e2 error
	var n1, n2 *idlegrid.Node
	goErr(&wg, &e1, func() (err error) { n1, err = r.db.SetNodeDraining(ctx, n.ID, ptr(at(time.Minute))); return })
	r.waitLocked(t, 1)
	goErr(&wg, &e2, func() (err error) { n2, err = r.db.SetNodeDraining(ctx, n.ID, ptr(at(2*time.Minute))); return })
	r.waitLocked(t, 2)
	release()
	wg.Wait()
	mustOK(t, e1)
	mustOK(t, e2)
	if !n1.DrainingSince.Equal(*n2.DrainingSince) {
		t.Errorf("the drain's start moved: %v then %v", n1.DrainingSince, n2.DrainingSince)
	}
}

// Two servers noting a node's heartbeats at once, the later heartbeat's
// first: the span keeps the later end, whatever each read before.
func TestDB_race_heartbeatSpanNeverShortens(t *testing.T) {
	r := newRig(t)
	other := mustOpen(t, r.dsn) // a second server's store
	ctx := context.Background()
	p := mustAccount(t, r.db, idlegrid.RoleProvider)
	n := mustNode(t, r.db, p.ID, 1)
	const interval, jitter = 10 * time.Second, 5 * time.Second
	mustOK(t, r.db.NoteHeartbeat(ctx, n.ID, t0, interval, jitter, t0.Add(-time.Hour)))
	release := r.block(t, `SELECT end_at FROM heartbeat_spans WHERE node_id = $1 FOR UPDATE`, n.ID)
	var wg sync.WaitGroup
	var e1, e2 error
	goErr(&wg, &e1, func() error {
		return r.db.NoteHeartbeat(ctx, n.ID, at(9*time.Second), interval, jitter, t0.Add(-time.Hour))
	})
	r.waitLocked(t, 1)
	goErr(&wg, &e2, func() error {
		return other.NoteHeartbeat(ctx, n.ID, at(4*time.Second), interval, jitter, t0.Add(-time.Hour))
	})
	r.waitLocked(t, 2)
	release()
	wg.Wait()
	mustOK(t, e1)
	mustOK(t, e2)
	spans, err := r.db.ListHeartbeatSpans(ctx, n.ID, t0, at(time.Hour))
	mustOK(t, err)
	if len(spans) != 1 || !spans[0].End.Equal(at(19*time.Second)) || spans[0].Heartbeats != 3 {
		t.Errorf("spans %+v; want one of 3 heartbeats ending at the later one's end, %v", spans, at(19*time.Second))
	}
}
