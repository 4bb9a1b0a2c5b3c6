package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// ListSettlements returns the settlements made in [f.From, f.To) of the
// renter's or the provider's leases, oldest first, each with what it
// billed and where the money went, read from its ledger entries.
func (db *DB) ListSettlements(ctx context.Context, f idlegrid.SettlementFilter) ([]*idlegrid.Settlement, error) {
	if f.RenterID == "" && f.ProviderID == "" {
		return nil, idlegrid.Invalid("settlements", "name a renter or a provider")
	} else if !f.From.Before(f.To) {
		return nil, idlegrid.Invalid("settlements.month", "from must be before to")
	}
	var a args
	q := `SELECT t.id, t.lease_id, t.gpu_seconds, t.created_at, l.job_id, l.renter_id, l.provider_id, l.node_id,
		l.price_micros, j.spec, n.offer
		FROM transfers t JOIN leases l ON l.id = t.lease_id JOIN jobs j ON j.id = l.job_id JOIN nodes n ON n.id = l.node_id
		WHERE t.kind = ` + a.add(string(idlegrid.TransferSettle)) +
		` AND t.created_at >= ` + a.add(timeArg(f.From)) + ` AND t.created_at < ` + a.add(timeArg(f.To))
	if f.RenterID != "" {
		q += ` AND l.renter_id = ` + a.add(f.RenterID)
	}
	if f.ProviderID != "" {
		q += ` AND l.provider_id = ` + a.add(f.ProviderID)
	}
	q += ` ORDER BY t.created_at, t.id`
	var out []*idlegrid.Settlement
	err := db.view(ctx, func(tx *sql.Tx) error {
		var err error
		if out, err = querySettlements(ctx, tx, q, a); err != nil {
			return err
		}
		for _, s := range out {
			entries, err := transferEntries(ctx, tx, s.TransferID)
			if err != nil {
				return err
			}
			splitSettlement(s, entries)
		}
		return nil
	})
	return out, err
}

func querySettlements(ctx context.Context, tx *sql.Tx, q string, a args) ([]*idlegrid.Settlement, error) {
	rows, err := tx.QueryContext(ctx, q, a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*idlegrid.Settlement
	for rows.Next() {
		var s idlegrid.Settlement
		var at sql.NullInt64
		var spec, offer string
		if err := rows.Scan(&s.TransferID, &s.LeaseID, &s.GPUSeconds, &at, &s.JobID, &s.RenterID, &s.ProviderID,
			&s.NodeID, &s.PriceMicrosPerGPUHour, &spec, &offer); err != nil {
			return nil, err
		}
		s.At = timeOf(at)
		var js idlegrid.JobSpec
		var o idlegrid.Offer
		if err := jsonOf(spec, &js); err != nil {
			return nil, err
		} else if err := jsonOf(offer, &o); err != nil {
			return nil, err
		}
		s.JobName, s.NodeName = js.Name, o.Name
		out = append(out, &s)
	}
	return out, rows.Err()
}

// splitSettlement reads a settlement's entries: what left the renter's
// escrow less what came back is the charge; the provider's pending credit
// is its earnings; the platform's credit is the fee.
func splitSettlement(s *idlegrid.Settlement, entries []idlegrid.Entry) {
	for _, e := range entries {
		switch {
		case e.Account == idlegrid.RenterHeld(s.RenterID) || e.Account == idlegrid.RenterAvailable(s.RenterID):
			s.ChargedMicros -= e.Amount
		case e.Account == idlegrid.PlatformFees:
			s.FeesMicros += e.Amount
		case strings.HasPrefix(string(e.Account), "provider:") && strings.HasSuffix(string(e.Account), ":pending"):
			s.EarningsMicros += e.Amount
		}
	}
}
