package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/idlegrid/idlegrid/internal/openai"
)

// TestStats_queryChecked: the gateway's own routes refuse an unknown or
// repeated query parameter, naming it, as the rest of the API does.
func TestStats_queryChecked(t *testing.T) {
	f := mustFixture(t, nil)
	for _, tt := range []struct {
		query      string
		wantStatus int
		wantParam  string
	}{
		{"usage?limit=5", http.StatusOK, ""},
		{"usage?bfore=x", http.StatusBadRequest, "bfore"},
		{"usage?limit=1&limit=1000", http.StatusBadRequest, "limit"},
		{"usage?=5", http.StatusBadRequest, "query"},
		{"stats", http.StatusOK, ""},
		{"stats?model=x", http.StatusBadRequest, "model"},
	} {
		req, err := http.NewRequest(http.MethodGet, f.URL+"/v1/inference/"+tt.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+f.RenterKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e openai.ErrorBody
		_ = json.Unmarshal(body, &e)
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if resp.StatusCode != tt.wantStatus || param != tt.wantParam {
			t.Errorf("GET /v1/inference/%s: %d %s, want %d naming %q", tt.query, resp.StatusCode, body, tt.wantStatus, tt.wantParam)
		}
	}
}
