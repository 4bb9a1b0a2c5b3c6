package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/metricstest"
)

// The gateway's metrics follow what it served, what failed and the
// breakers that tripped.
func TestGateway_metrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	clock := &manualClock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	p := mustPair(t, func(c *gateway.Config) {
		c.Metrics, c.Clock, c.BreakerFailures, c.BreakerCooldown = reg, clock, 2, time.Minute
	})
	p.A.set(fault429) // busy once, then failing twice: its breaker trips
	if _, _, err := p.chat(t, cheapestFirst); err != nil {
		t.Fatal(err)
	}
	p.A.set(fault500)
	for range 2 {
		if _, _, err := p.chat(t, cheapestFirst); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.stream(t, cheapestFirst); err != nil { // beta alone now
		t.Fatal(err)
	}
	if err := p.GW.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	model := map[string]string{"model": testModel}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"idlegrid_inference_latency_seconds", model, 4},
		{"idlegrid_inference_ttft_seconds", model, 1}, // the stream's alone
		{"idlegrid_inference_provider_failures_total", map[string]string{"reason": "busy"}, 1},
		{"idlegrid_inference_provider_failures_total", map[string]string{"reason": "failed"}, 2},
		{"idlegrid_inference_breaker_trips_total", nil, 1},
		{"idlegrid_inference_breakers_open", nil, 1},
		{"idlegrid_inference_in_flight", nil, 0},
		{"idlegrid_inference_waiting", nil, 0},
		{"idlegrid_inference_charges_failed_total", nil, 0},
	} {
		if got := metricstest.Value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, kind := range []string{"input", "output"} {
		if got := metricstest.Value(t, reg, "idlegrid_inference_tokens_total", map[string]string{"model": testModel, "kind": kind}); got <= 0 {
			t.Errorf("%s tokens = %v, want some", kind, got)
		}
	}
	if got := metricstest.Value(t, reg, "idlegrid_inference_charged_micros_total", model); got <= 0 {
		t.Errorf("charged = %v, want some", got)
	}
	if got := metricstest.Value(t, reg, "idlegrid_inference_meter_write_seconds", nil); got < 1 {
		t.Errorf("meter writes = %v, want at least one", got)
	}
}
