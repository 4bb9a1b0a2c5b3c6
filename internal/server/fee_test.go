package server_test

import (
	"context"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

func TestOpen_feeBasisPoints(t *testing.T) {
	store, err := sqlstore.Open(context.Background(), sqlstoretest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, tt := range []struct {
		bps      int64
		wantCode string
	}{
		{bps: -1},     // no fee
		{bps: 0},      // the default
		{bps: 10_000}, // all of it
		{bps: 10_001, wantCode: idlegrid.EINVALID},
	} {
		srv, err := server.Open(server.Config{Store: store, FeeBasisPoints: tt.bps})
		if got := idlegrid.ErrorCode(err); got != tt.wantCode {
			t.Errorf("Open(FeeBasisPoints: %d) = %v (code %q), want code %q", tt.bps, err, got, tt.wantCode)
		}
		if err == nil {
			srv.Close()
		}
	}
}
