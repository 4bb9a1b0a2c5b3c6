package ledger

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// NewStatement adds up a month of settlements and inference totals into a
// statement for the account: a renter's has one line per job and locked
// price (so that every line's total is its GPU-hours at its price, give or
// take the rounding of each lease), a provider's one line per node.
// Settlements are taken in the order given; lines keep the order of their
// first settlement. The inference totals (Store.InferenceTotals) follow as
// they are, a provider's with its earnings, and the total adds them in.
func NewStatement(accountID string, role idlegrid.Role, month string, from, to time.Time,
	settlements []*idlegrid.Settlement, inference []*idlegrid.InferenceTotal) *idlegrid.Statement {
	s := &idlegrid.Statement{AccountID: accountID, Role: role, Month: month, From: from, To: to,
		Lines: []idlegrid.StatementLine{}, Inference: []idlegrid.InferenceTotal{}}
	index := map[string]int{}
	for _, x := range settlements {
		key, line := x.NodeID, idlegrid.StatementLine{NodeID: x.NodeID, NodeName: x.NodeName}
		if role != idlegrid.RoleProvider {
			key = x.JobID + "@" + strconv.FormatInt(int64(x.PriceMicrosPerGPUHour), 10)
			line = idlegrid.StatementLine{JobID: x.JobID, JobName: x.JobName, PriceMicrosPerGPUHour: x.PriceMicrosPerGPUHour}
		}
		i, ok := index[key]
		if !ok {
			i = len(s.Lines)
			index[key] = i
			s.Lines = append(s.Lines, line)
		}
		add(&s.Lines[i], x, role)
		add(&s.Total, x, role)
	}
	for i := range s.Lines {
		s.Lines[i].GPUHours = idlegrid.GPUHours(s.Lines[i].GPUSeconds)
	}
	for _, x := range inference {
		line := *x
		if role == idlegrid.RoleProvider {
			line.EarningsMicros = line.ChargedMicros - line.FeesMicros
			s.Total.FeesMicros += line.FeesMicros
			s.Total.EarningsMicros += line.EarningsMicros
		} else {
			line.NodeID, line.NodeName, line.FeesMicros = "", "", 0
		}
		s.Total.Requests += line.Requests
		s.Total.ChargedMicros += line.ChargedMicros
		s.Inference = append(s.Inference, line)
	}
	s.Total.GPUHours = idlegrid.GPUHours(s.Total.GPUSeconds)
	AddPenalties(s, []idlegrid.StatementPenalty{})
	return s
}

// AddPenalties puts the month's upheld disputes ps on statement s, and
// takes what they refunded off its sales: a provider's earnings, a
// renter's charges.
func AddPenalties(s *idlegrid.Statement, ps []idlegrid.StatementPenalty) {
	s.Penalties, s.RefundedMicros = ps, 0
	for _, p := range ps {
		s.RefundedMicros += p.RefundMicros
	}
	s.NetMicros = s.Total.ChargedMicros - s.RefundedMicros
	if s.Role == idlegrid.RoleProvider {
		s.NetMicros = s.Total.EarningsMicros - s.RefundedMicros
	}
}

func add(l *idlegrid.StatementLine, x *idlegrid.Settlement, role idlegrid.Role) {
	l.Leases++
	l.GPUSeconds += x.GPUSeconds
	l.ChargedMicros += x.ChargedMicros
	if role == idlegrid.RoleProvider {
		l.FeesMicros += x.FeesMicros
		l.EarningsMicros += x.EarningsMicros
	}
}

// WriteStatementCSV writes s as CSV with a header row, a row per line, a
// row per inference total (job_id "inference" for a renter's; its node's
// ID and name for a provider's), a row per dispute upheld in the month
// (job_id, or for a provider's node_name, "dispute"), and a closing
// "total" row. Amounts are decimal units with six places, e.g. 1.250000.
// The columns after the sales are the inference rows' model and requests
// (and the total's requests), then the dispute rows' penalty and refund,
// dispute ID, offence and lease (and the total's penalties and refunds):
// the sales columns of a dispute row are zero, so that they still sum to
// the total's, which is the sales.
func WriteStatementCSV(w io.Writer, s *idlegrid.Statement) error {
	cw := csv.NewWriter(w)
	provider := s.Role == idlegrid.RoleProvider
	disputeCols := []string{"penalty", "refund", "dispute_id", "offence", "lease_id"}
	noDispute := make([]string, len(disputeCols))
	if provider {
		cw.Write(append([]string{"month", "node_id", "node_name", "leases", "gpu_seconds", "gpu_hours", "sales", "fees", "earnings", "model", "requests"}, disputeCols...))
	} else {
		cw.Write(append([]string{"month", "job_id", "job_name", "leases", "gpu_seconds", "gpu_hours", "price_per_gpu_hour", "total", "model", "requests"}, disputeCols...))
	}
	row := func(l idlegrid.StatementLine, total bool) []string {
		id, name := l.JobID, l.JobName
		if provider {
			id, name = l.NodeID, l.NodeName
		}
		if total {
			id, name = "total", ""
		}
		r := []string{s.Month, id, name, strconv.Itoa(l.Leases), strconv.FormatInt(l.GPUSeconds, 10), l.GPUHours}
		requests := ""
		if total {
			requests = strconv.FormatInt(l.Requests, 10)
		}
		if provider {
			return append(r, units(l.ChargedMicros), units(l.FeesMicros), units(l.EarningsMicros), "", requests)
		}
		price := ""
		if !total {
			price = units(l.PriceMicrosPerGPUHour)
		}
		return append(r, price, units(l.ChargedMicros), "", requests)
	}
	for _, l := range s.Lines {
		cw.Write(append(row(l, false), noDispute...))
	}
	for _, x := range s.Inference {
		requests := strconv.FormatInt(x.Requests, 10)
		if provider {
			cw.Write(append([]string{s.Month, x.NodeID, x.NodeName, "0", "0", idlegrid.GPUHours(0),
				units(x.ChargedMicros), units(x.FeesMicros), units(x.EarningsMicros), x.Model, requests}, noDispute...))
		} else {
			cw.Write(append([]string{s.Month, "inference", "", "0", "0", idlegrid.GPUHours(0), "", units(x.ChargedMicros), x.Model, requests}, noDispute...))
		}
	}
	var penalties, refunds idlegrid.Micros
	for _, p := range s.Penalties {
		var r []string
		if provider {
			r = []string{s.Month, p.NodeID, "dispute", "0", "0", idlegrid.GPUHours(0), units(0), units(0), units(0), "", ""}
		} else {
			r = []string{s.Month, "dispute", "", "0", "0", idlegrid.GPUHours(0), "", units(0), "", ""}
		}
		cw.Write(append(r, units(p.PenaltyMicros), units(p.RefundMicros), p.DisputeID, p.Offence, p.LeaseID))
		penalties, refunds = penalties+p.PenaltyMicros, refunds+p.RefundMicros
	}
	cw.Write(append(row(s.Total, true), units(penalties), units(refunds), "", "", ""))
	cw.Flush()
	return cw.Error()
}

// units writes an amount as decimal units without the currency sign.
func units(m idlegrid.Micros) string { return strings.Replace(m.String(), "$", "", 1) }
