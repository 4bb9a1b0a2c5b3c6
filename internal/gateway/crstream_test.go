package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// A model server whose stream's lines end in \r alone, as server-sent
// events allow, is passed on as it sent it, but for the usage event a
// renter did not ask for, and metered by its own usage.
func TestGateway_streamCarriageReturns(t *testing.T) {
	f := mustFixture(t, nil)
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	up.set(faultCR)
	for _, asked := range []bool{false, true} {
		body := `{"model":"llama-test","stream":true,"messages":[{"role":"user","content":"Say hello."}]}`
		if asked {
			body = strings.Replace(body, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
		}
		answer := string(postAnswer(t, f, openai.ChatCompletions, body))
		events := strings.Split(strings.TrimSuffix(answer, "\r\r"), "\r\r")
		usageEvents := 0
		for _, ev := range events {
			if strings.Contains(ev, `"choices":[]`) {
				usageEvents++
			}
		}
		if strings.Contains(answer, "\n") || len(events) != 6+usageEvents || events[len(events)-1] != "data: [DONE]" ||
			usageEvents != map[bool]int{false: 0, true: 1}[asked] {
			t.Errorf("include_usage %v: the renter got %q; want the five chunks, a usage event only if asked, and [DONE], lines ending in \\r", asked, answer)
		}
		mustSync(t, f)
		us, err := f.Store.ListInferenceUsage(context.Background(), idlegrid.UsageFilter{AccountID: f.RenterID, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if u := us[0]; u.InputTokens != mockPromptTokens || u.OutputTokens != mockCompletionTokens || u.Source != idlegrid.UsageUpstream {
			t.Errorf("include_usage %v: metered %d in, %d out from %s; want the model server's %d and %d", asked, u.InputTokens, u.OutputTokens, u.Source, mockPromptTokens, mockCompletionTokens)
		}
	}
}
