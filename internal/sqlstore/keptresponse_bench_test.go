package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// BenchmarkKeepResponses keeps responses of about 2 KiB each from 64
// goroutines at once, as the gateway keeps those of concurrent renters'
// requests, each before its renter reads the answer's end. It reports
// responses/s.
//
//	go test -run '^$' -bench BenchmarkKeepResponses -benchtime 20000x ./internal/sqlstore
func BenchmarkKeepResponses(b *testing.B) {
	const senders = 64
	ctx := context.Background()
	db := mustOpen(b, filepath.Join(b.TempDir(), "idlegrid.db"))
	renter := mustAccount(b, db, idlegrid.RoleRenter)
	text, _ := json.Marshal(strings.Repeat("tok ", 400))
	input := json.RawMessage(`[{"role":"user","content":"Summarise this support ticket in one line."}]`)
	output := json.RawMessage(`{"object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":` + string(text) + `}]}]}`)
	b.ResetTimer()
	concurrently(b, senders, func(i int64) error {
		return db.KeepResponse(ctx, &idlegrid.KeptResponse{ID: fmt.Sprintf("resp_%08d", i), RenterID: renter.ID, Model: "m",
			Input: input, Response: output, CreatedAt: t0, ExpiresAt: t0.Add(30 * 24 * time.Hour)})
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "responses/s")
}
