package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"testing"
)

// userView plays `idlegrid audit verify`: it watches an honest log grow,
// keeping every head it is shown, and gathers the evidence to check.
type userView struct {
	log     *Log
	heads   []SignedTreeHead
	entries []Entry // all entries, in log order, to find the user's own
}

func newUserView(tb testing.TB) *userView {
	tb.Helper()
	return &userView{log: NewLog(&MemoryStore{}, mustKey(tb, 1), &stepClock{now: t0})}
}

// grow appends entries and shows the user the new head.
func (u *userView) grow(tb testing.TB, entries ...Entry) {
	tb.Helper()
	ctx := context.Background()
	if _, err := u.log.AppendEntries(ctx, entries...); err != nil {
		tb.Fatal(err)
	}
	u.entries = append(u.entries, entries...)
	h, err := u.log.SignedHead(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	u.heads = append(u.heads, h)
}

// evidence gathers proofs for subject's entries against the latest head and
// the consistency proofs between the heads, as the CLI will from the server.
func (u *userView) evidence(tb testing.TB, subject string) *Evidence {
	tb.Helper()
	ctx := context.Background()
	ev := &Evidence{Heads: slices.Clone(u.heads)}
	for _, need := range ConsistencyNeeded(u.heads) {
		p, err := u.log.ConsistencyProof(ctx, need.From, need.To)
		if err != nil {
			tb.Fatal(err)
		}
		ev.Consistency = append(ev.Consistency, ConsistencyProof{From: need.From, To: need.To, Path: p})
	}
	size := u.heads[len(u.heads)-1].Size
	for i, e := range u.entries {
		if !e.Concerns(subject) {
			continue
		}
		p, err := u.log.InclusionProof(ctx, uint64(i), size)
		if err != nil {
			tb.Fatal(err)
		}
		ev.Entries = append(ev.Entries, EntryProof{Entry: e, InclusionProof: InclusionProof{Index: uint64(i), TreeSize: size, Path: p}})
	}
	return ev
}

func entriesFor(tb testing.TB, from, n int, subjects ...string) []Entry {
	tb.Helper()
	out := mustEntries(tb, from+n)[from:]
	for i := range out {
		out[i].Subjects = subjects
	}
	return out
}

func mustHonestView(tb testing.TB) *userView {
	tb.Helper()
	u := newUserView(tb)
	u.grow(tb, entriesFor(tb, 0, 3, "rnt_a")...)
	u.grow(tb, entriesFor(tb, 3, 14, "rnt_b")...)
	u.grow(tb, entriesFor(tb, 17, 1, "rnt_a", "prv_c")...)
	u.grow(tb) // a head of the same size again
	u.grow(tb, entriesFor(tb, 18, 20, "rnt_b")...)
	return u
}

func TestCheck_Honest(t *testing.T) {
	u := mustHonestView(t)
	r := Check(u.log.PublicKey(), u.evidence(t, "rnt_a"))
	if !r.OK() {
		t.Fatalf("an honest log fails: %v", r.Err())
	}
	if r.HeadsVerified != 5 || r.ExtensionsShown != 3 || r.EntriesIncluded != 4 || !slices.Equal(r.Sizes, []uint64{3, 17, 18, 38}) {
		t.Errorf("got %+v, want 5 heads, 3 extensions, 4 entries, sizes 3 17 18 38", r)
	}
}

// TestCheck_PrettyPrinted checks evidence that went through an indenting
// JSON encoder, as a CLI that saves it to a file might.
func TestCheck_PrettyPrinted(t *testing.T) {
	u := mustHonestView(t)
	b, err := json.MarshalIndent(u.evidence(t, "rnt_a"), "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("\"seq\": 0")) {
		t.Fatalf("the payload was not re-indented: the test proves nothing\n%s", b)
	}
	var ev Evidence
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	if r := Check(u.log.PublicKey(), &ev); !r.OK() {
		t.Errorf("got %v", r.Err())
	}
}

// rewrittenLog is the honest history with entry 1 changed: a log operator
// quietly editing a posting, then signing heads over the new history.
func rewrittenLog(tb testing.TB, u *userView) *Log {
	tb.Helper()
	entries := slices.Clone(u.entries)
	entries[1].Payload = json.RawMessage(`{"seq":1,"amount":0}`)
	log := NewLog(&MemoryStore{}, mustKey(tb, 1), &stepClock{now: t0.Add(3600e9)})
	if _, err := log.AppendEntries(context.Background(), entries...); err != nil {
		tb.Fatal(err)
	}
	return log
}

func TestCheck_Attacks(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		attack func(t *testing.T, u *userView, ev *Evidence)
		want   ProblemKind
	}{
		{"history rewritten", func(t *testing.T, u *userView, ev *Evidence) {
			// The user held heads of the honest log; now the server shows a
			// larger head of the rewritten one, with the best proof it has.
			bad := rewrittenLog(t, u)
			if _, err := bad.AppendEntries(ctx, entriesFor(t, 40, 2, "rnt_b")...); err != nil {
				t.Fatal(err)
			}
			h, _ := bad.SignedHead(ctx)
			p, _ := bad.ConsistencyProof(ctx, 38, h.Size)
			ev.Heads = append(ev.Heads, h)
			ev.Consistency = append(ev.Consistency, ConsistencyProof{From: 38, To: h.Size, Path: p})
		}, ProblemInconsistent},
		{"fork at one size", func(t *testing.T, u *userView, ev *Evidence) {
			h, _ := rewrittenLog(t, u).SignedHead(ctx)
			ev.Heads = append(ev.Heads, h)
		}, ProblemFork},
		{"head not signed by the log", func(t *testing.T, u *userView, ev *Evidence) {
			h := ev.Heads[0]
			ev.Heads[0] = SignTreeHead(mustKey(t, 9), h.TreeHead)
		}, ProblemSignature},
		{"entry changed", func(t *testing.T, u *userView, ev *Evidence) {
			ev.Entries[0].Entry.Payload = json.RawMessage(`{"seq":0,"amount":1}`)
		}, ProblemNotIncluded},
		{"entry dropped from the log", func(t *testing.T, u *userView, ev *Evidence) {
			// The server proves some other leaf at the user's entry's index.
			ev.Entries[1].Index = 5
		}, ProblemNotIncluded},
		{"entry proven against an unsigned size", func(t *testing.T, u *userView, ev *Evidence) {
			ev.Entries[0].TreeSize = 30
		}, ProblemNoHead},
		{"consistency proof withheld", func(t *testing.T, u *userView, ev *Evidence) {
			ev.Consistency = ev.Consistency[1:]
		}, ProblemMissingProof},
		{"consistency proof garbled", func(t *testing.T, u *userView, ev *Evidence) {
			ev.Consistency[0].Path[0][0] ^= 1
		}, ProblemInconsistent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := mustHonestView(t)
			ev := u.evidence(t, "rnt_a")
			tt.attack(t, u, ev)
			r := Check(u.log.PublicKey(), ev)
			if r.OK() {
				t.Fatal("the attack went unnoticed")
			}
			if r.Problems[0].Kind != tt.want {
				t.Errorf("got %v, want a %s problem", r.Problems, tt.want)
			}
		})
	}
}

func TestCheck_BadKey(t *testing.T) {
	u := mustHonestView(t)
	r := Check(ed25519.PublicKey("short"), u.evidence(t, "rnt_a"))
	if r.OK() || r.Problems[0].Kind != ProblemSignature {
		t.Errorf("got %+v, want a signature problem", r)
	}
}

func TestConsistencyNeeded(t *testing.T) {
	hs := func(sizes ...uint64) []SignedTreeHead {
		var out []SignedTreeHead
		for _, s := range sizes {
			out = append(out, SignedTreeHead{TreeHead: TreeHead{Size: s}})
		}
		return out
	}
	got := ConsistencyNeeded(hs(9, 0, 3, 9, 3, 12))
	want := []ConsistencyProof{{From: 3, To: 9}, {From: 9, To: 12}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i].From != want[i].From || got[i].To != want[i].To {
			t.Errorf("got %v, want %v", got, want)
		}
	}
}
