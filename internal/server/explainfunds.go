package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// shortfall is one reason a renter cannot pay for a placement now, and
// what would let it.
type shortfall struct {
	why string // what falls short, e.g. "waiting for funds: …"
	fix string // what to do, with the command that does it
}

// holdOf is the escrow a placement holds from its renter: its leases'
// holds together.
func holdOf(p *idlegrid.Placement) idlegrid.Micros {
	var hold idlegrid.Micros
	for _, l := range p.Leases {
		hold += l.HoldMicros
	}
	return hold
}

// moneyShort says what keeps j's renter from paying a placement that
// holds hold now: its available balance (which storePlacement checks) and
// the spend limits of its account and of the API key that submitted j
// (which the store checks as it places the job). None: it can pay.
func (s *Server) moneyShort(ctx context.Context, j *idlegrid.Job, hold idlegrid.Micros) ([]shortfall, error) {
	b, err := s.store.Balance(ctx, j.RenterID)
	if err != nil {
		return nil, err
	}
	var out []shortfall
	if hold > b.Available {
		out = append(out, shortfall{
			why: fmt.Sprintf("%s: its escrow hold would be %s and the renter has %s available", market.ReasonPrefixFunds, hold, b.Available),
			fix: fmt.Sprintf("add at least %s to the account: an admin runs 'idlegrid account topup %s AMOUNT'", hold-b.Available, j.RenterID),
		})
	}
	limits, err := s.store.ListSpendLimits(ctx, j.RenterID)
	if err != nil {
		return nil, err
	}
	for _, l := range limits {
		if l.Scope == idlegrid.SpendKey && l.KeyID != j.SubmittedByKey {
			continue // another key's: it does not limit j
		}
		st, err := s.limitStatus(ctx, l)
		if err != nil {
			return nil, err
		}
		if used := st.Spend.Used(); used+hold > l.LimitMicros {
			out = append(out, limitShortfall(st, hold))
		}
	}
	return out, nil
}

// limitShortfall is the shortfall of a placement holding hold that the
// limit st would refuse, with the command that raises or lifts it. The
// limit is reached only when what its month used already comes to it;
// otherwise it is this placement's hold that would exceed it, and a
// smaller one, of at most what is left, would fit, as the gateway tells a
// request (gateway's overLimit).
func limitShortfall(st *idlegrid.SpendLimitStatus, hold idlegrid.Micros) shortfall {
	what, fix := "account "+st.AccountID, fmt.Sprintf("an admin runs 'idlegrid account limit %s AMOUNT' or 'idlegrid account limit %s none'", st.AccountID, st.AccountID)
	if st.Scope == idlegrid.SpendKey {
		what, fix = "API key "+st.KeyID, fmt.Sprintf("a key of the account with access all (a key of access use may not) runs 'idlegrid key limit %s AMOUNT' or 'idlegrid key limit %s none'", st.KeyID, st.KeyID)
	}
	used := st.Spend.Used()
	if used >= st.LimitMicros {
		return shortfall{
			why: fmt.Sprintf("%sof %s reached: %s a month, %s used in %s, and this placement would hold %s more",
				market.ReasonPrefixSpendLimit, what, st.LimitMicros, used, st.Month, hold),
			fix: fmt.Sprintf("raise the spend limit of %s to at least %s, or lift it (it resets next month): %s", what, used+hold, fix),
		}
	}
	left := st.LimitMicros - used
	return shortfall{
		why: fmt.Sprintf("%sof %s would be exceeded: %s a month, %s used in %s (%s left), and this placement would hold %s more",
			market.ReasonPrefixSpendLimit, what, st.LimitMicros, used, st.Month, left, hold),
		fix: fmt.Sprintf("raise the spend limit of %s to at least %s, or lift it: %s; or submit the job again to hold at most %s (fewer GPUs or a shorter duration)",
			what, used+hold, fix, left),
	}
}

// waitForMoney turns x, an explanation of a job the engine would place
// now, into one of a job that waits for money: it says what falls short,
// gives no estimated start (it starts at the first placement pass after
// the renter can pay), and advises what would let it start.
func waitForMoney(x *market.Explanation, hold idlegrid.Micros, shorts []shortfall) {
	whys := make([]string, 0, len(shorts))
	fixes := make([]string, 0, len(shorts))
	for _, sh := range shorts {
		whys, fixes = append(whys, sh.why), append(fixes, sh.fix)
	}
	x.Summary = strings.Join(whys, "; ") + "; nodes would take it now, but it waits until the renter can pay"
	x.EstimatedStart = time.Time{}
	x.EstimateNote = fmt.Sprintf("unknown: it starts at the first placement pass after the renter can pay its escrow hold of %s", hold)
	x.Advice = append(fixes, x.Advice...)
}
