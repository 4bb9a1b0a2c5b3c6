package idlegrid

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Micros is an amount of money in micro-units: 1,000,000 Micros is one unit
// of account (one US dollar in the default deployment). Money is never a float.
type Micros int64

// MicrosPerUnit is the number of Micros in one unit of account.
const MicrosPerUnit Micros = 1_000_000

// String formats m as a decimal amount with six places, e.g. "$1.250000".
func (m Micros) String() string {
	sign, u := "", uint64(m)
	if m < 0 {
		sign, u = "-", -u // the magnitude, even for math.MinInt64
	}
	return fmt.Sprintf("%s$%d.%06d", sign, u/uint64(MicrosPerUnit), u%uint64(MicrosPerUnit))
}

// ParseMicros parses a decimal amount such as "2.50", "$2.5" or "0.000001"
// into Micros. More than six decimal places is an error, not a rounding.
func ParseMicros(s string) (Micros, error) {
	s = strings.TrimSpace(s)
	neg := false
	if rest, ok := strings.CutPrefix(s, "-"); ok { // "-$1.25", as String writes it
		neg, s = true, rest
	}
	s = strings.TrimPrefix(s, "$")
	if rest, ok := strings.CutPrefix(s, "-"); ok && !neg { // "$-1.25"
		neg, s = true, rest
	}
	s = strings.TrimSpace(s)
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" {
		return 0, fmt.Errorf("empty amount")
	}
	if !allDigits(whole) || !allDigits(frac) {
		return 0, fmt.Errorf("not a decimal amount: %q", s)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("at most 6 decimal places")
	}
	w := int64(0)
	if whole != "" {
		var err error
		if w, err = strconv.ParseInt(whole, 10, 64); err != nil || w < 0 {
			return 0, fmt.Errorf("not a decimal amount: %q", s)
		}
	}
	if w > math.MaxInt64/int64(MicrosPerUnit)-1 {
		return 0, fmt.Errorf("amount too large")
	}
	f := int64(0)
	if frac != "" {
		var err error
		if f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64); err != nil || f < 0 {
			return 0, fmt.Errorf("not a decimal amount: %q", s)
		}
	}
	m := Micros(w)*MicrosPerUnit + Micros(f)
	if neg {
		m = -m
	}
	return m, nil
}

// CostOf returns the cost of gpuSeconds at pricePerGPUHour, rounded down to
// the micro. It is the one place where a price meets a duration.
func CostOf(pricePerGPUHour Micros, gpuSeconds int64) Micros {
	// Split to avoid overflow for long leases at high prices.
	hours := gpuSeconds / 3600
	rest := gpuSeconds % 3600
	return pricePerGPUHour*Micros(hours) + pricePerGPUHour*Micros(rest)/3600
}

// allDigits reports whether s is only ASCII digits; "" is.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
