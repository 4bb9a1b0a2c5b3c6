package idlegrid_test

import (
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestGPUHours(t *testing.T) {
	for _, tt := range []struct {
		secs int64
		want string
	}{
		{0, "0.000000"}, {3600, "1.000000"}, {5400, "1.500000"}, {1, "0.000277"}, {7199, "1.999722"}, {36 * 3600, "36.000000"},
	} {
		if got := idlegrid.GPUHours(tt.secs); got != tt.want {
			t.Errorf("GPUHours(%d) = %q, want %q", tt.secs, got, tt.want)
		}
	}
}

func TestParseMonth(t *testing.T) {
	from, to, err := idlegrid.ParseMonth("2026-11")
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC); !from.Equal(want) {
		t.Errorf("from = %v, want %v", from, want)
	}
	if want := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC); !to.Equal(want) {
		t.Errorf("to = %v, want %v", to, want)
	}
	for _, bad := range []string{"", "2026-13", "2026-1-1", "nov", "9999-12", "1969-12"} {
		if _, _, err := idlegrid.ParseMonth(bad); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("ParseMonth(%q) = %v, want EINVALID", bad, err)
		}
	}
	mf, mt := idlegrid.MonthOf(time.Date(2026, 12, 31, 23, 59, 0, 0, time.FixedZone("x", -3600)))
	if mf.Month() != time.January || mf.Year() != 2027 || !mt.Equal(mf.AddDate(0, 1, 0)) {
		t.Errorf("MonthOf a New Year's Eve an hour west of UTC = %v..%v, want January 2027", mf, mt)
	}
}

func TestSpendLimit_Validate(t *testing.T) {
	ok := []idlegrid.SpendLimit{
		{Scope: idlegrid.SpendAccount, AccountID: "a", LimitMicros: 0},
		{Scope: idlegrid.SpendKey, AccountID: "a", KeyID: "k", LimitMicros: 100},
	}
	for _, l := range ok {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	bad := []struct {
		l     idlegrid.SpendLimit
		field string
	}{
		{idlegrid.SpendLimit{Scope: "team", AccountID: "a"}, "spend_limit.scope"},
		{idlegrid.SpendLimit{Scope: idlegrid.SpendAccount}, "spend_limit.account_id"},
		{idlegrid.SpendLimit{Scope: idlegrid.SpendKey, AccountID: "a"}, "spend_limit.key_id"},
		{idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: "a", KeyID: "k"}, "spend_limit.key_id"},
		{idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: "a", LimitMicros: -1}, "spend_limit.limit_micros"},
	}
	for _, tt := range bad {
		wantField(t, tt.l.Validate(), tt.field)
	}
}
