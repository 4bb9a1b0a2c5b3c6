package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid/internal/metricstest"
)

// The store times its transactions by kind and the SQLite writers' queue,
// and says database/sql's pool.
func TestDB_metrics(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "idlegrid.db"))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(db.Collectors()...)
	a := mustAccount(t, db, "renter") // a write
	for range 2 {
		if _, err := db.FindAccount(context.Background(), a.ID); err != nil { // a read
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"idlegrid_store_transaction_seconds", map[string]string{"kind": "write"}, 1},
		{"idlegrid_store_transaction_seconds", map[string]string{"kind": "read"}, 2},
		{"idlegrid_store_writer_wait_seconds", nil, 1},
		{"idlegrid_store_transaction_retries_total", nil, 0},
		{"idlegrid_store_placement_batches_redone_total", nil, 0},
		{"go_sql_wait_count_total", map[string]string{"db_name": "idlegrid"}, 0},
	} {
		if got := metricstest.Value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
