package market_test

import (
	"testing"

	"github.com/idlegrid/idlegrid/internal/market"
)

// TestWaitsForMoney: the engine knows a job waits for money by the reasons
// the scheduler gives it (the server's tests check those reasons).
func TestWaitsForMoney(t *testing.T) {
	for reason, want := range map[string]bool{
		"waiting for funds: the escrow hold is $1.000000 and the renter has $0.000000 available; top up the account": true,
		"waiting: spend limit of account acct_1 reached: $1.000000 a month":                                          true,
		"no node fits: 2 cap below ask": false,
		"":                              false,
	} {
		if got := market.WaitsForMoney(reason); got != want {
			t.Errorf("WaitsForMoney(%q) = %v, want %v", reason, got, want)
		}
	}
}
