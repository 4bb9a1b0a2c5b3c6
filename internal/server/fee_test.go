package server_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

func TestOpen_feeBasisPoints(t *testing.T) {
	store, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "idlegrid.db"))
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
