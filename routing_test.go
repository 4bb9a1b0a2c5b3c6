package idlegrid_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
)

func TestParseRouting(t *testing.T) {
	t.Run("reads", func(t *testing.T) {
		no := false
		m := func(v idlegrid.Micros) *idlegrid.Micros { return &v }
		got, err := idlegrid.ParseRouting("provider", []byte(`{"sort":"price","only":["node_a"],"allow_fallbacks":false,"max_price":{"prompt":1.5,"completion":"0.000002"}}`))
		want := &idlegrid.Routing{Sort: "price", Only: []string{"node_a"}, AllowFallbacks: &no,
			MaxPrice: &idlegrid.RoutingMaxPrice{Prompt: m(1_500_000), Completion: m(2)}}
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseRouting (-want +got):\n%s", diff)
		}
	})
	for _, field := range []string{"provider", "routing"} {
		t.Run("errors name "+field, func(t *testing.T) {
			for _, tt := range []struct{ body, field string }{
				{`{"sort":"cheapest"}`, ".sort"},
				{`{"sorting":"price"}`, ".sorting"},
				{`{"order":[1]}`, ".order"},
				{`{"region":["eu","eu"]}`, ".region[1]"},
				{`{"region":["eu-west","EU-West"]}`, ".region[1]"},
				{`{"region":["eu west"]}`, ".region[0]"},
				{`{"region":["-eu"]}`, ".region[0]"},
				{`{"max_price":{"prompt":"1.5.0"}}`, ".max_price.prompt"},
				{`{"max_price":{"completion":"-2"}}`, ".max_price.completion"},
				{`{"max_price":{"prompt":"$1.50"}}`, ".max_price.prompt"},
				{`{"max_price":{"prompt":" 1.5"}}`, ".max_price.prompt"},
				{`{"max_price":{"prompt":1e-3}}`, ".max_price.prompt"},
				{`{"max_price":{"prompt":true}}`, ".max_price.prompt"},
				{`{"max_price":[]}`, ".max_price"},
				{`{"max_price":"x"}`, ".max_price"},
				{`{"max_price":{"prompt":"1","cost":"2"}}`, ".max_price.cost"},
				{`{"sort":"price"} {}`, ""},
				{`"price"`, ""},
			} {
				_, err := idlegrid.ParseRouting(field, []byte(tt.body))
				if e, ok := err.(*idlegrid.Error); !ok || e.Code != idlegrid.EINVALID || e.Field != field+tt.field {
					t.Errorf("ParseRouting(%q, %s): %v, want EINVALID on %s", field, tt.body, err, field+tt.field)
				} else if strings.Contains(e.Message, "Go ") || strings.Contains(e.Message, "idlegrid.") {
					t.Errorf("ParseRouting(%q, %s): %q, want it in a JSON author's words, not Go's", field, tt.body, e.Message)
				}
			}
		})
	}
}
