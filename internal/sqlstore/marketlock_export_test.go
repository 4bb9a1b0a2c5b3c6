package sqlstore

import "context"

// LockMarketWith takes db's market lock as LockMarket does, kept as cfg
// says.
func LockMarketWith(ctx context.Context, db *DB, cfg MarketLockConfig) (*MarketLock, error) {
	return db.lockMarket(ctx, cfg)
}

// MarketLockInDoubt is closed once l is in doubt (at once when it is now),
// as long as it has not been sure again since this call.
func MarketLockInDoubt(l *MarketLock) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.doubt
}

// MarketLockKey is the key of the market's PostgreSQL advisory lock.
const MarketLockKey = marketLockKey

// MarketLockSetting is the value of setting name on l's session.
func MarketLockSetting(ctx context.Context, l *MarketLock, name string) (string, error) {
	var v string
	err := l.conn.QueryRowContext(ctx, "SHOW "+name).Scan(&v)
	return v, err
}
