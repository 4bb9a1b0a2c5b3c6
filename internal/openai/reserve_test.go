package openai_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid/internal/openai"
)

// The reservation counts the whole body that becomes prompt tokens: the
// tools, the response format and a chat's tool calls, not the messages'
// text alone; the sampling parameters count for nothing.
func TestRequest_ReservePromptTokensCountsTheBody(t *testing.T) {
	desc := strings.Repeat("d", 8000)
	tools := fmt.Sprintf(`[{"type":"function","function":{"name":"f","description":%q,"parameters":{"type":"object"}}}]`, desc)
	format := fmt.Sprintf(`{"type":"json_schema","json_schema":{"name":"s","schema":{"description":%q}}}`, desc)
	calls := fmt.Sprintf(`[{"id":"c1","type":"function","function":{"name":"f","arguments":%q}}]`, desc)
	plain := `{"model":"m","temperature":0.5,"max_tokens":9,"messages":[{"role":"user","content":"Hi"}]}`
	r := mustParse(t, openai.ChatCompletions, []byte(plain))
	if got := r.ReservePromptTokens(); got != r.PromptTokens {
		t.Errorf("without tools: ReservePromptTokens = %d, want the prompt's estimate %d", got, r.PromptTokens)
	}
	body := `{"model":"m","tools":` + tools + `,"response_format":` + format +
		`,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":` + calls + `}]}`
	r = mustParse(t, openai.ChatCompletions, []byte(body))
	want := r.PromptTokens + openai.EstimateTokens(len(tools)+len(format)+len(calls))
	if got := r.ReservePromptTokens(); got != want || got < 3*8000/openai.BytesPerToken {
		t.Errorf("with tools, a response format and a tool call: ReservePromptTokens = %d, want %d", got, want)
	}
}
