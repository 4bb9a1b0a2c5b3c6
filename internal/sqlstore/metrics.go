package sqlstore

import (
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// storeMetrics time the store's transactions for an operator's
// Prometheus. They exist from Open on, and count whether or not anyone
// registers them (Collectors).
type storeMetrics struct {
	tx         *prometheus.HistogramVec // by kind: read, write
	read       prometheus.Observer
	write      prometheus.Observer
	writerWait prometheus.Histogram
	retries    prometheus.Counter
}

func newStoreMetrics() *storeMetrics {
	m := &storeMetrics{
		tx: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "idlegrid_store_transaction_seconds", Help: "How long the store's transactions took, retries included, by kind (read, write).",
			Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10), // 50 µs to 13 s
		}, []string{"kind"}),
		writerWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "idlegrid_store_writer_wait_seconds", Help: "How long a write transaction waited for this process's other SQLite writers (none on PostgreSQL).",
			Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10), // 10 µs to 2.6 s
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idlegrid_store_transaction_retries_total", Help: "Transactions the database aborted (a deadlock, a serialization failure, a busy SQLite) and the store ran again.",
		}),
	}
	m.read = m.tx.WithLabelValues("read")
	m.write = m.tx.WithLabelValues("write")
	return m
}

// observeTx records a transaction that began at start.
func (m *storeMetrics) observeTx(opts *sql.TxOptions, start time.Time) {
	o := m.write
	if opts != nil && opts.ReadOnly {
		o = m.read
	}
	o.Observe(time.Since(start).Seconds())
}

// Collectors are the store's metrics, for the registry GET /metrics
// serves: its transactions' times, the SQLite writers' queue, retries,
// batches of placements redone one by one, and database/sql's pool
// (go_sql_*, db_name="idlegrid").
func (db *DB) Collectors() []prometheus.Collector {
	redone := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "idlegrid_store_placement_batches_redone_total", Help: "Batches of placements written again one by one after one of them failed.",
	}, func() float64 { return float64(db.batchesRedone.Load()) })
	return []prometheus.Collector{
		db.metrics.tx, db.metrics.writerWait, db.metrics.retries, redone,
		collectors.NewDBStatsCollector(db.db, "idlegrid"),
	}
}
