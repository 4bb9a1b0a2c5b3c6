package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/idlegrid/idlegrid"
)

// hungStore is a store whose inference writes never finish, as on a
// PostgreSQL connection gone quiet: each waits until its context ends and
// fails each charge with the context's error.
type hungStore struct {
	idlegrid.InferenceStore // nil: only RecordInference is called
	writes                  atomic.Int64
}

func (s *hungStore) RecordInference(ctx context.Context, cs []idlegrid.InferenceCharge) []error {
	s.writes.Add(1)
	<-ctx.Done()
	errs := make([]error, len(cs))
	for i := range errs {
		errs[i] = ctx.Err()
	}
	return errs
}

func testCharge(id string) idlegrid.InferenceCharge {
	return idlegrid.InferenceCharge{Usage: &idlegrid.InferenceUsage{ID: id, RenterID: "acct_renter", ChargeMicros: 170}}
}

// TestMeter_storeHangs: a write to a store that hangs is given up after
// meterWriteTimeout as a store fault, so the charge waits to be written
// again; a charge that comes meanwhile waits with it, the store not asked;
// and close ends after one more write. Without the timeout the meter
// waits for ever and synctest reports the deadlock.
func TestMeter_storeHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hungStore{}
		m := startMeter(s, nil, newMetrics(), slog.New(slog.DiscardHandler), nil)
		m.add(testCharge("req_1"), nil)
		if err := m.sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n, w := m.retries.Load(), s.writes.Load(); n != 1 || w != 1 {
			t.Fatalf("after a write timed out: %d charges wait to be written again, %d writes; want 1 and 1", n, w)
		}
		m.add(testCharge("req_2"), nil)
		if err := m.sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n, w := m.retries.Load(), s.writes.Load(); n != 2 || w != 1 {
			t.Errorf("a charge queued while the store fails: %d charges wait, %d writes; want 2 and 1 (it waits untried)", n, w)
		}
		m.close()
		if w := s.writes.Load(); w != 2 {
			t.Errorf("close wrote %d times to a store that hangs, want once", w-1)
		}
	})
}

// TestReplay_storeHangs: the replay of the journal at start gives up on a
// store that hangs, as a store fault, so that the gateway opens and the
// journal's files stay for the next start.
func TestReplay_storeHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := []idlegrid.InferenceCharge{testCharge("req_1"), testCharge("req_2")}
		err := replay(context.Background(), &hungStore{}, cs, newMetrics(), slog.New(slog.DiscardHandler), nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("replay to a store that hangs: %v, want it to give up (context.DeadlineExceeded)", err)
		}
	})
}
