package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// TestGateway_readKey checks that a key with access read may read the
// gateway but not spend through it, as the API refuses it a POST.
func TestGateway_readKey(t *testing.T) {
	f := mustFixture(t, nil)
	ctx := context.Background()
	_, secret, err := client.New(f.URL, f.RenterKey).CreateAPIKeyWithAccess(ctx, "dashboard", idlegrid.AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	c := f.sdk(secret)
	if _, err := c.Models.List(ctx); err != nil {
		t.Fatalf("a read key lists the models: %s", describe(err))
	}
	_, err = c.Chat.Completions.New(ctx, chatParams("Hi"))
	var e *oai.Error
	if !errors.As(err, &e) || e.StatusCode != 403 || !strings.Contains(e.Message, "access is read") {
		t.Errorf("a read key's chat: %s, want 403 saying its access", describe(err))
	}
}
