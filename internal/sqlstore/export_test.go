package sqlstore

// BatchesRedone returns how many batches of placements db placed again
// behind savepoints after one of them failed.
func BatchesRedone(db *DB) int64 { return db.batchesRedone.Load() }
