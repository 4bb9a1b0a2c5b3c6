package openai_test

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"

	"github.com/idlegrid/idlegrid/internal/openai"
)

// A completions batch (a list of prompts) is answered prompt by prompt,
// n completions each: the choices, and the most an honest answer's
// completion may hold, count every prompt. (An honest model server's
// usage for a two-prompt stream was capped as if it had answered one.)
func TestRequest_completionsBatchChoices(t *testing.T) {
	for _, tt := range []struct {
		e    openai.Endpoint
		body string
		want int64
	}{
		{openai.Completions, `{"model":"m","prompt":"one"}`, 1},
		{openai.Completions, `{"model":"m","prompt":["a","b"]}`, 2},
		{openai.Completions, `{"model":"m","prompt":["a","b"],"n":3}`, 6},
		{openai.Completions, `{"model":"m","prompt":[1,2,3]}`, 1},
		{openai.Completions, `{"model":"m","prompt":[[1,2],[3]]}`, 2},
		{openai.ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, 1},
		{openai.Embeddings, `{"model":"m","input":["a","b"]}`, 1},
	} {
		r, err := openai.ParseRequest(tt.e, []byte(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if r.Choices != tt.want {
			t.Errorf("%s %s: %d choices, want %d", tt.e, tt.body, r.Choices, tt.want)
		}
		if tt.e == openai.Completions && r.MostCompletionTokens(0) < 16*tt.want {
			t.Errorf("%s: at most %d completion tokens with nothing relayed, want room for each choice's end", tt.body, r.MostCompletionTokens(0))
		}
	}
}

// A completions batch holds at most MaxBatchPrompts prompts: the choices
// it asks for, and so its reservation, stay bounded.
func TestRequest_completionsBatchBounded(t *testing.T) {
	prompts := strings.Repeat(`"a",`, openai.MaxBatchPrompts) + `"a"`
	_, err := openai.ParseRequest(openai.Completions, []byte(`{"model":"m","prompt":[`+prompts+`]}`))
	if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "prompt") {
		t.Errorf("%d prompts: %v, want EINVALID naming prompt", openai.MaxBatchPrompts+1, err)
	}
}
