package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// TestGateway_keyRouting checks that a key's default routing, set through
// the API, applies to the key's requests, and that a request's own
// provider object overrides it field by field.
func TestGateway_keyRouting(t *testing.T) {
	p := mustPair(t, nil) // alpha: eu-west, EU, 10/20; beta: us-east, US, 30/60
	a, b := p.NodeA.NodeID, p.NodeB.NodeID
	ctx := context.Background()
	renter := client.New(p.URL, p.RenterKey)
	key, secret, err := renter.CreateAPIKey(ctx, "routed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := renter.SetKeyRouting(ctx, key.ID, idlegrid.Routing{Region: []string{"us-east"}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		prefs map[string]any // the request's own provider object; nil: none
		want  string
	}{
		{"the key's default", nil, b},
		{"another field keeps the key's region", map[string]any{"sort": "price"}, b},
		{"the request's region wins", map[string]any{"region": []string{"eu-west"}}, a},
		{"an empty list lifts the key's", map[string]any{"region": []string{}, "sort": "price"}, a},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var opts []option.RequestOption
			if tt.prefs != nil {
				opts = append(opts, option.WithJSONSet("provider", tt.prefs))
			}
			var resp *http.Response
			c := p.sdk(secret)
			if _, err := c.Chat.Completions.New(ctx, chatParams("Hi"), append(opts, option.WithResponseInto(&resp))...); err != nil {
				t.Fatal(describe(err))
			}
			if got := resp.Header.Get("X-Idlegrid-Node"); got != tt.want {
				t.Errorf("served by %s, want %s", got, tt.want)
			}
		})
	}
	t.Run("the renter's other key is unaffected", func(t *testing.T) {
		_, resp, err := p.chat(t, cheapestFirst)
		if err != nil {
			t.Fatal(describe(err))
		}
		if got := resp.Header.Get("X-Idlegrid-Node"); got != a {
			t.Errorf("served by %s, want %s", got, a)
		}
	})
}

// TestGateway_keyRoutingBinds: a key of access use is bound by its
// routing: its requests may not lift or widen it.
func TestGateway_keyRoutingBinds(t *testing.T) {
	p := mustPair(t, nil) // alpha: eu-west, EU, 10/20; beta: us-east, US, 30/60
	b := p.NodeB.NodeID
	ctx := context.Background()
	renter := client.New(p.URL, p.RenterKey)
	key, secret, err := renter.CreateAPIKeyWithAccess(ctx, "teammate", idlegrid.AccessUse)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := renter.SetKeyRouting(ctx, key.ID, idlegrid.Routing{Region: []string{"us-east"}}); err != nil {
		t.Fatal(err)
	}
	for _, prefs := range []map[string]any{
		{"region": []string{}, "sort": "price"},
		{"region": []string{"us-east", "eu-west"}, "sort": "price"},
	} {
		var resp *http.Response
		c := p.sdk(secret)
		_, err := c.Chat.Completions.New(ctx, chatParams("Hi"), option.WithJSONSet("provider", prefs), option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(describe(err))
		}
		if got := resp.Header.Get("X-Idlegrid-Node"); got != b {
			t.Errorf("provider %v: served by %s, want %s: the key's region binds it", prefs, got, b)
		}
	}
	c := p.sdk(secret)
	_, err = c.Chat.Completions.New(ctx, chatParams("Hi"), option.WithJSONSet("provider", map[string]any{"region": []string{"eu-west"}}))
	var e *oai.Error
	if !errors.As(err, &e) || e.StatusCode != 403 || !strings.Contains(e.Message, "provider.region") || e.Param != "provider.region" {
		t.Errorf("a region outside the key's: %s (param %q), want 403 naming provider.region, in param too", describe(err), e.Param)
	}
}
