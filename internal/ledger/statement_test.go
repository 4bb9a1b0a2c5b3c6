package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

func statementSettlements() []*idlegrid.Settlement {
	return []*idlegrid.Settlement{
		{LeaseID: "lease_1", JobID: "job_1", JobName: "train", NodeID: "node_a", NodeName: "barn-1", PriceMicrosPerGPUHour: 500_000,
			GPUSeconds: 7200, ChargedMicros: 1_000_000, EarningsMicros: 900_000, FeesMicros: 100_000},
		{LeaseID: "lease_2", JobID: "job_2", JobName: "eval", NodeID: "node_b", NodeName: "barn-2", PriceMicrosPerGPUHour: 400_000,
			GPUSeconds: 1800, ChargedMicros: 200_000, EarningsMicros: 180_000, FeesMicros: 20_000},
		{LeaseID: "lease_3", JobID: "job_1", JobName: "train", NodeID: "node_b", NodeName: "barn-2", PriceMicrosPerGPUHour: 500_000,
			GPUSeconds: 3600, ChargedMicros: 500_000, EarningsMicros: 450_000, FeesMicros: 50_000},
		{LeaseID: "lease_4", JobID: "job_1", JobName: "train", NodeID: "node_a", NodeName: "barn-1", PriceMicrosPerGPUHour: 600_000,
			GPUSeconds: 0, ChargedMicros: 0}, // provider at fault: billed nothing
	}
}

// statementInference is a month of requests: a renter's, by model, or a
// provider's, by node and model.
func statementInference() []*idlegrid.InferenceTotal {
	return []*idlegrid.InferenceTotal{
		{NodeID: "node_a", NodeName: "barn-1", Model: "llama-8b", Requests: 12, InputTokens: 3000, OutputTokens: 900,
			ChargedMicros: 40_000, FeesMicros: 4_000},
		{NodeID: "node_b", NodeName: "barn-2", Model: "llama-8b", Requests: 3, InputTokens: 700, OutputTokens: 200,
			ChargedMicros: 10_000, FeesMicros: 1_000},
	}
}

func TestNewStatement_renter(t *testing.T) {
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	s := ledger.NewStatement("renter_1", idlegrid.RoleRenter, "2026-11", from, from.AddDate(0, 1, 0), statementSettlements(), statementInference()[:1])
	want := []idlegrid.StatementLine{
		{JobID: "job_1", JobName: "train", Leases: 2, GPUSeconds: 10800, GPUHours: "3.000000", PriceMicrosPerGPUHour: 500_000, ChargedMicros: 1_500_000},
		{JobID: "job_2", JobName: "eval", Leases: 1, GPUSeconds: 1800, GPUHours: "0.500000", PriceMicrosPerGPUHour: 400_000, ChargedMicros: 200_000},
		{JobID: "job_1", JobName: "train", Leases: 1, GPUSeconds: 0, GPUHours: "0.000000", PriceMicrosPerGPUHour: 600_000},
	}
	if diff := cmp.Diff(want, s.Lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	wantInference := []idlegrid.InferenceTotal{{Model: "llama-8b", Requests: 12, InputTokens: 3000, OutputTokens: 900, ChargedMicros: 40_000}}
	if diff := cmp.Diff(wantInference, s.Inference); diff != "" {
		t.Errorf("inference (-want +got):\n%s", diff)
	}
	if total := (idlegrid.StatementLine{Leases: 4, Requests: 12, GPUSeconds: 12600, GPUHours: "3.500000", ChargedMicros: 1_740_000}); s.Total != total {
		t.Errorf("total = %+v, want %+v", s.Total, total)
	}
	// The month's disputes are rows of their own, in their own columns,
	// whose sales columns are zero: the total is still the sales.
	if s.RefundedMicros != 0 || s.NetMicros != s.Total.ChargedMicros {
		t.Errorf("refunded %s, net %s without disputes; want none, and the total", s.RefundedMicros, s.NetMicros)
	}
	ledger.AddPenalties(s, []idlegrid.StatementPenalty{{DisputeID: "dispute_1", Offence: "mismatched_result", NodeID: "node_b", LeaseID: "lease_2",
		PenaltyMicros: 300_000, PenaltyTo: "renter", RefundMicros: 200_000, UpheldAt: from.Add(48 * time.Hour)}})
	if s.RefundedMicros != 200_000 || s.NetMicros != 1_540_000 {
		t.Errorf("refunded %s, net %s; want $0.20 refunded of the $1.74 charged", s.RefundedMicros, s.NetMicros)
	}
	var b strings.Builder
	if err := ledger.WriteStatementCSV(&b, s); err != nil {
		t.Fatal(err)
	}
	wantCSV := `month,job_id,job_name,leases,gpu_seconds,gpu_hours,price_per_gpu_hour,total,model,requests,penalty,refund,dispute_id,offence,lease_id
2026-11,job_1,train,2,10800,3.000000,0.500000,1.500000,,,,,,,
2026-11,job_2,eval,1,1800,0.500000,0.400000,0.200000,,,,,,,
2026-11,job_1,train,1,0,0.000000,0.600000,0.000000,,,,,,,
2026-11,inference,,0,0,0.000000,,0.040000,llama-8b,12,,,,,
2026-11,dispute,,0,0,0.000000,,0.000000,,,0.300000,0.200000,dispute_1,mismatched_result,lease_2
2026-11,total,,4,12600,3.500000,,1.740000,,12,0.300000,0.200000,,,
`
	if b.String() != wantCSV {
		t.Errorf("CSV:\n%s\nwant:\n%s", b.String(), wantCSV)
	}
}

func TestNewStatement_provider(t *testing.T) {
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	s := ledger.NewStatement("prov_1", idlegrid.RoleProvider, "2026-11", from, from.AddDate(0, 1, 0), statementSettlements(), statementInference())
	want := []idlegrid.StatementLine{
		{NodeID: "node_a", NodeName: "barn-1", Leases: 2, GPUSeconds: 7200, GPUHours: "2.000000", ChargedMicros: 1_000_000, FeesMicros: 100_000, EarningsMicros: 900_000},
		{NodeID: "node_b", NodeName: "barn-2", Leases: 2, GPUSeconds: 5400, GPUHours: "1.500000", ChargedMicros: 700_000, FeesMicros: 70_000, EarningsMicros: 630_000},
	}
	if diff := cmp.Diff(want, s.Lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if s.Inference[0].EarningsMicros != 36_000 || s.Inference[1].EarningsMicros != 9_000 {
		t.Errorf("inference earnings %+v, want sales less fees", s.Inference)
	}
	if total := (idlegrid.StatementLine{Leases: 4, Requests: 15, GPUSeconds: 12600, GPUHours: "3.500000", ChargedMicros: 1_750_000,
		FeesMicros: 175_000, EarningsMicros: 1_575_000}); s.Total != total {
		t.Errorf("total = %+v, want %+v", s.Total, total)
	}
	if s.NetMicros != s.Total.EarningsMicros {
		t.Errorf("net %s without disputes, want the earnings", s.NetMicros)
	}
	ledger.AddPenalties(s, []idlegrid.StatementPenalty{
		{DisputeID: "dispute_1", Offence: "mismatched_result", NodeID: "node_b", LeaseID: "lease_2", PenaltyMicros: 300_000,
			PenaltyTo: "renter", RefundMicros: 180_000, UpheldAt: from.Add(48 * time.Hour)},
		{DisputeID: "dispute_2", Offence: "fake_hardware", PenaltyMicros: 1_000_000, PenaltyTo: "platform", UpheldAt: from.Add(72 * time.Hour)},
	})
	if s.RefundedMicros != 180_000 || s.NetMicros != 1_395_000 {
		t.Errorf("refunded %s, net %s; want $0.18 refunded of the $1.575 earned (the bond's penalties are not earnings)", s.RefundedMicros, s.NetMicros)
	}
	var b strings.Builder
	if err := ledger.WriteStatementCSV(&b, s); err != nil {
		t.Fatal(err)
	}
	wantCSV := `month,node_id,node_name,leases,gpu_seconds,gpu_hours,sales,fees,earnings,model,requests,penalty,refund,dispute_id,offence,lease_id
2026-11,node_a,barn-1,2,7200,2.000000,1.000000,0.100000,0.900000,,,,,,,
2026-11,node_b,barn-2,2,5400,1.500000,0.700000,0.070000,0.630000,,,,,,,
2026-11,node_a,barn-1,0,0,0.000000,0.040000,0.004000,0.036000,llama-8b,12,,,,,
2026-11,node_b,barn-2,0,0,0.000000,0.010000,0.001000,0.009000,llama-8b,3,,,,,
2026-11,node_b,dispute,0,0,0.000000,0.000000,0.000000,0.000000,,,0.300000,0.180000,dispute_1,mismatched_result,lease_2
2026-11,,dispute,0,0,0.000000,0.000000,0.000000,0.000000,,,1.000000,0.000000,dispute_2,fake_hardware,
2026-11,total,,4,12600,3.500000,1.750000,0.175000,1.575000,,15,1.300000,0.180000,,,
`
	if b.String() != wantCSV {
		t.Errorf("CSV:\n%s\nwant:\n%s", b.String(), wantCSV)
	}
	empty := ledger.NewStatement("prov_1", idlegrid.RoleProvider, "2026-12", from, from, nil, nil)
	if empty.Lines == nil || len(empty.Lines) != 0 || empty.Inference == nil || len(empty.Inference) != 0 || empty.Total.GPUHours != "0.000000" {
		t.Errorf("empty statement = %+v", empty)
	}
}
