package idlegrid_test

import (
	"math"
	"testing"

	"github.com/idlegrid/idlegrid"
)

func TestTokenCost(t *testing.T) {
	for _, tt := range []struct {
		price  idlegrid.Micros
		tokens int64
		want   idlegrid.Micros
	}{
		{price: 1_000_000, tokens: 1, want: 1}, // $1 per million: a micro a token
		{price: 200_000, tokens: 7, want: 1},   // 1.4 micros, rounded down
		{price: 200_000, tokens: 4, want: 0},   // 0.8 micros
		{price: 10_000_000_000, tokens: 1_000_000, want: 10_000_000_000},
		{price: 0, tokens: 100, want: 0},
		{price: 5, tokens: -3, want: 0},
		{price: math.MaxInt64, tokens: math.MaxInt64, want: math.MaxInt64}, // saturates, never wraps
	} {
		if got := idlegrid.TokenCost(tt.price, tt.tokens); got != tt.want {
			t.Errorf("TokenCost(%d, %d) = %d, want %d", tt.price, tt.tokens, got, tt.want)
		}
	}
	m := idlegrid.ModelOffer{InputMicrosPerMTokens: 10_000_000, OutputMicrosPerMTokens: 20_000_000}
	if got := m.Cost(7, 5); got != 170 {
		t.Errorf("Cost(7, 5) = %d, want 170", got)
	}
	dear := idlegrid.ModelOffer{InputMicrosPerMTokens: 5_000_000_000, OutputMicrosPerMTokens: 5_000_000_000}
	if got := dear.Cost(1<<62, 1<<62); got != 1<<63-1 {
		t.Errorf("Cost of more than a Micros holds = %d, want the largest Micros, never a wrap to negative", got)
	}
}

// TestPerMTokens: the average price per million tokens is exact where
// charged times a million is beyond int64 ($15,000,000 for 1e12 tokens
// is $15 per million), rounds toward zero, and saturates rather than
// wraps.
func TestPerMTokens(t *testing.T) {
	for _, tt := range []struct {
		charged idlegrid.Micros
		tokens  int64
		want    idlegrid.Micros
	}{
		{charged: 15_000_000_000_000, tokens: 1_000_000_000_000, want: 15_000_000},
		{charged: 10_240_000_000_000, tokens: 1_024_000_000, want: 10_000_000_000},
		{charged: 1, tokens: 3, want: 333_333}, // rounded down
		{charged: -1, tokens: 3, want: -333_333},
		{charged: 170, tokens: 12, want: 14_166_666},
		{charged: 5, tokens: 0, want: 0},
		{charged: 5, tokens: -1, want: 0},
		{charged: math.MaxInt64, tokens: 1, want: math.MaxInt64}, // saturates, never wraps
		{charged: math.MinInt64, tokens: 1, want: -math.MaxInt64},
	} {
		if got := idlegrid.PerMTokens(tt.charged, tt.tokens); got != tt.want {
			t.Errorf("PerMTokens(%d, %d) = %d, want %d", tt.charged, tt.tokens, got, tt.want)
		}
	}
	// TokenCost turned around: what tokens cost at a price is that price
	// per million again, to within the micro TokenCost rounds away.
	for _, price := range []idlegrid.Micros{1, 200_000, 15_000_000, 10_000_000_000} {
		const tokens = 1_000_000_000_000
		if got := idlegrid.PerMTokens(idlegrid.TokenCost(price, tokens), tokens); got != price {
			t.Errorf("PerMTokens(TokenCost(%d, %d)) = %d, want %d", price, int64(tokens), got, price)
		}
	}
}

func TestOffer_Validate_models(t *testing.T) {
	ok := idlegrid.ModelOffer{Name: "llama-3.1-8b", InputMicrosPerMTokens: 1, OutputMicrosPerMTokens: 2, MaxConcurrency: 4}
	for _, tt := range []struct {
		name   string
		models []idlegrid.ModelOffer
		field  string
	}{
		{"fine", []idlegrid.ModelOffer{ok}, ""},
		{"twice", []idlegrid.ModelOffer{ok, ok}, "offer.models"},
		{"no concurrency", []idlegrid.ModelOffer{{Name: "m", MaxConcurrency: 0}}, "offer.models.m.max_concurrency"},
		{"negative price", []idlegrid.ModelOffer{{Name: "m", InputMicrosPerMTokens: -1, MaxConcurrency: 1}}, "offer.models.m.input_micros_per_mtokens"},
		{"bad name", []idlegrid.ModelOffer{{Name: "a b", MaxConcurrency: 1}}, "offer.models.a b.name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := validOffer()
			o.Models = tt.models
			err := o.Validate()
			var got string
			if e, ok := err.(*idlegrid.Error); ok {
				got = e.Field
			} else if err != nil {
				t.Fatalf("error %v is not an *idlegrid.Error", err)
			}
			if got != tt.field {
				t.Errorf("Validate() field %q (%v), want %q", got, err, tt.field)
			}
		})
	}
}
