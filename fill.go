package idlegrid

import "time"

// FillHistory is how much of what a provider offered was leased, day by
// day: the provider dashboard's "fill rate over time".
type FillHistory struct {
	ProviderID string    `json:"provider_id"`
	Days       []FillDay `json:"days"` // oldest first; the last is today, up to now
	// Note states how the numbers are made, for whoever reads them.
	Note string `json:"note"`
}

// FillDay is one UTC day of a provider's fill. GPU-hours are GPUs times
// hours; Fill is LeasedGPUHours / OfferedGPUHours, 0 when nothing was
// offered (and it may exceed 1 when a lease ran outside the node's windows).
type FillDay struct {
	Day             string    `json:"day"`   // e.g. "2026-11-30"
	Start           time.Time `json:"start"` // the day's UTC midnight
	OfferedGPUHours float64   `json:"offered_gpu_hours"`
	LeasedGPUHours  float64   `json:"leased_gpu_hours"`
	Fill            float64   `json:"fill"`
	// EarningsMicros is what the provider was credited for leases settled
	// that day (Settlement.EarningsMicros), not for the GPU-time leased.
	EarningsMicros Micros `json:"earnings_micros"`
}

// Fill history bounds: the days a FillHistory covers unless asked, and at most.
const (
	DefaultFillDays = 14
	MaxFillDays     = 90
)
