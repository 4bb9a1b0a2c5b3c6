package infersim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
)

func TestGPU_Timing(t *testing.T) {
	h100 := GPUs["H100-80GB"]
	// 989.4 TFLOP/s × 0.5 / (2 × 8e9) and 3.35 TB/s × 0.6 / 16 GB.
	if got, want := h100.PrefillTokensPerSecond(), 30918.75; math.Abs(got-want) > 0.01 {
		t.Errorf("prefill = %v tokens/s, want %v", got, want)
	}
	if got, want := h100.DecodeTokensPerSecond(), 125.625; math.Abs(got-want) > 0.001 {
		t.Errorf("decode = %v tokens/s, want %v", got, want)
	}
	ttft, decode := h100.Timing(1000, 101)
	if want := requestOverhead + 32343*time.Microsecond; ttft.Round(time.Microsecond) != want {
		t.Errorf("ttft = %v, want %v", ttft, want)
	}
	if want := 796020 * time.Microsecond; decode.Round(time.Microsecond) != want {
		t.Errorf("decode = %v, want %v", decode, want)
	}
	if _, decode := h100.Timing(10, 1); decode != 0 {
		t.Errorf("one token's decode = %v, want 0: it comes with the first", decode)
	}
}

func TestFaults_Draw(t *testing.T) {
	f := Faults{Error500: 0.1, Busy429: 0.2, Stall: 0.3, Drop: 0.1}
	for _, tc := range []struct {
		u    float64
		want string
	}{{0, fault500}, {0.05, fault500}, {0.15, fault429}, {0.45, faultStall}, {0.65, faultDrop}, {0.75, faultNone}, {0.99, faultNone}} {
		if got := f.draw(tc.u); got != tc.want {
			t.Errorf("draw(%v) = %q, want %q", tc.u, got, tc.want)
		}
	}
	// Twice the shares add to 1.4: they keep their ratio and add to 1.
	got := f.scaled(2)
	if math.Abs(got.Error500+got.Busy429+got.Stall+got.Drop-1) > 1e-9 || math.Abs(got.Stall-3*got.Error500) > 1e-9 || math.Abs(got.Busy429-2*got.Drop) > 1e-9 {
		t.Errorf("scaled(2) = %+v, want shares in ratio 1:2:3:1 adding to 1", got)
	}
	if got, want := f.scaled(0.5), (Faults{0.05, 0.1, 0.15, 0.05}); got != want {
		t.Errorf("scaled(0.5) = %+v, want %+v", got, want)
	}
	if got := f.scaled(0); got != (Faults{}) {
		t.Errorf("scaled(0) = %+v, want none", got)
	}
}

func TestChatBody(t *testing.T) {
	for _, tc := range []struct{ context, generated, wantPrompt, wantMax int }{
		{1469, 13, 1469, 13}, {1, 1, 1, 1}, {0, 0, 1, 1},
	} {
		var body chatRequest
		if err := json.Unmarshal(chatBody(7, Request{Service: "code", ContextTokens: tc.context, GeneratedTokens: tc.generated}, true), &body); err != nil {
			t.Fatal(err)
		}
		if got := body.Messages[0].Content.tokens; got != tc.wantPrompt || body.MaxTokens != tc.wantMax || body.User != "code-7" || !body.Stream || body.Model != "sim-8b-code" {
			t.Errorf("context %d, generated %d: got %d prompt words, %+v; want %d words, max_tokens %d, user code-7, streamed, model sim-8b-code",
				tc.context, tc.generated, got, body, tc.wantPrompt, tc.wantMax)
		}
	}
}

func TestUnitHash(t *testing.T) {
	a, b := unitHash(1, "p", "code-1"), unitHash(1, "p", "code-1")
	if a != b || a < 0 || a >= 1 {
		t.Fatalf("unitHash = %v then %v, want the same number in [0, 1)", a, b)
	}
	// Neighbouring requests must not draw alike: over 10,000 of them a
	// 15% fault strikes 15% ± 1%.
	hits := 0
	for i := range 10000 {
		if unitHash(1, "p", "code-"+itoa(i)) < 0.15 {
			hits++
		}
	}
	if hits < 1400 || hits > 1600 {
		t.Errorf("%d of 10000 under 0.15, want about 1500", hits)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestChatRequest_answerTokens(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"max_tokens":7}`, 7},
		{`{"max_completion_tokens":5}`, 5},
		{`{"max_tokens":7,"max_completion_tokens":5}`, 5},
		{`{}`, DefaultAnswerTokens},
		{`{"max_tokens":0}`, DefaultAnswerTokens},
	} {
		var req chatRequest
		if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
			t.Fatal(err)
		}
		if got := req.answerTokens(); got != tc.want {
			t.Errorf("%s: %d tokens, want %d", tc.body, got, tc.want)
		}
	}
}

// A request with no limit gets a whole short answer, not one token.
func TestModelServer_noLimit(t *testing.T) {
	s, err := StartModelServer("H100-80GB", []string{"m"}, idlegrid.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"Hello there"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %v", resp.Status, err)
	}
	if got.Usage.PromptTokens != 2 || got.Usage.CompletionTokens != DefaultAnswerTokens {
		t.Errorf("usage %+v, want 2 prompt tokens and %d completion tokens", got.Usage, DefaultAnswerTokens)
	}
}

// The simulated model server's /metrics page counts the requests being
// answered and says none wait, in vLLM's gauges, which the agent reads.
func TestModelServer_metrics(t *testing.T) {
	s, err := StartModelServer("RTX4090", []string{"m"}, idlegrid.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	page := func() string {
		resp, err := http.Get(strings.TrimSuffix(s.URL(), "/v1") + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// A streamed answer of 400 tokens takes the RTX 4090's decode about
	// 10 s: it runs while the page is read.
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"max_tokens":400,"messages":[{"role":"user","content":"Hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 1)
	if _, err := resp.Body.Read(first); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`vllm:num_requests_running{model_name="m"} 1`, `vllm:num_requests_waiting{model_name="m"} 0`} {
		if got := page(); !strings.Contains(got, want+"\n") {
			t.Errorf("metrics while answering:\n%s\nwant a line %s", got, want)
		}
	}
	cfg := agent.Config{Models: []agent.ModelConfig{{Name: "m", Upstream: s.URL(), InputPrice: "0.10", OutputPrice: "0.30", MaxConcurrency: 4}}}
	checks := cfg.CheckModels(context.Background())
	if len(checks) != 1 || checks[0].Problem != "" || checks[0].Queued != 0 || checks[0].Gauge != "vllm:num_requests_waiting" {
		t.Errorf("the agent's check: %+v, want the model healthy and 0 queued by vllm:num_requests_waiting", checks)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(page(), `vllm:num_requests_running{model_name="m"} 0`+"\n") {
		if time.Now().After(deadline) {
			t.Fatalf("metrics after the answer was cut:\n%s", page())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testNow is the time the model servers of modelServerSDK stamp their
// answers with.
var testNow = time.Date(2026, 12, 7, 23, 30, 0, 0, time.UTC)

// stoppedClock tells testNow, always.
type stoppedClock struct{}

func (stoppedClock) Now() time.Time { return testNow }

// modelServerSDK starts a simulated model server of model "m" on an H100
// for the test, its clock stopped at testNow, and returns OpenAI's Go SDK
// pointed at it.
func modelServerSDK(t *testing.T) oai.Client {
	t.Helper()
	s, err := StartModelServer("H100-80GB", []string{"m"}, stoppedClock{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return oai.NewClient(option.WithBaseURL(s.URL()), option.WithAPIKey("none"), option.WithMaxRetries(0))
}

// The simulated model server answers as a real one does, read by OpenAI's
// Go SDK: a stream's first chunk names the assistant's role and its last
// content chunk the finish reason ("length" at the request's limit, "stop"
// when it set none), a chunk of usage follows only when the request asked
// (stream_options.include_usage), all of an answer's chunks share one ID,
// and two answers have two, as do two servers' (two runs of idlegrid dev);
// every chunk and answer is created when the server's clock says.
func TestModelServer_answersAsARealServer(t *testing.T) {
	sdk := modelServerSDK(t)
	ctx := context.Background()
	params := oai.ChatCompletionNewParams{Model: "m", MaxTokens: oai.Int(5),
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Hello")}}
	var ids, all []string // the last stream's chunks' IDs; every answer's
	for _, usage := range []bool{false, true} {
		if usage {
			params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
		}
		stream := sdk.Chat.Completions.NewStreaming(ctx, params)
		var acc oai.ChatCompletionAccumulator
		ids = ids[:0]
		usageChunks := 0
		for stream.Next() {
			c := stream.Current()
			acc.AddChunk(c)
			ids = append(ids, c.ID)
			if c.Created != testNow.Unix() {
				t.Errorf("chunk created %d, want the clock's %d", c.Created, testNow.Unix())
			}
			if len(c.Choices) == 0 {
				usageChunks++
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Role != "assistant" || acc.Choices[0].FinishReason != "length" ||
			countWords(acc.Choices[0].Message.Content) != 5 {
			t.Errorf("streamed answer %+v; want one choice of the assistant's 5 words, finished for length", acc.Choices)
		}
		if want := map[bool]int64{false: 0, true: 5}[usage]; acc.Usage.CompletionTokens != want || usageChunks != int(want/5) {
			t.Errorf("include_usage %v: usage %+v in %d chunks without choices; want %d completion tokens", usage, acc.Usage, usageChunks, want)
		}
		if len(ids) == 0 || ids[0] == "" || slices.ContainsFunc(ids, func(id string) bool { return id != ids[0] }) {
			t.Errorf("chunk IDs %q, want one ID, not empty", ids)
		}
		all = append(all, ids[0])
	}
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{}

	params.MaxTokens = oai.ChatCompletionNewParams{}.MaxTokens
	whole, err := sdk.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Choices[0].FinishReason != "stop" || whole.Choices[0].Message.Role != "assistant" || whole.Usage.CompletionTokens != DefaultAnswerTokens {
		t.Errorf("answer without a limit: %+v, usage %+v; want the assistant's, stopped, %d tokens", whole.Choices[0], whole.Usage, DefaultAnswerTokens)
	}
	if whole.ID == "" || whole.ID == ids[0] {
		t.Errorf("answer IDs %q and %q, want two", ids[0], whole.ID)
	}
	if whole.Created != testNow.Unix() {
		t.Errorf("answer created %d, want the clock's %d", whole.Created, testNow.Unix())
	}
	// Another run (a restart of idlegrid dev) numbers its answers afresh,
	// but repeats none of the first's IDs.
	other := modelServerSDK(t)
	again, err := other.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if all = append(all, whole.ID); slices.Contains(all, again.ID) {
		t.Errorf("another server's first answer has ID %q, as one of the first server's answers %q", again.ID, all)
	}
}

// TestModelServer_textCompletions: the simulated server serves the
// legacy POST /v1/completions as vLLM does, whole and streamed: text in
// its choices, a cmpl- ID, OpenAI's default limit of 16 tokens, and the
// prompt's words counted.
func TestModelServer_textCompletions(t *testing.T) {
	sdk := modelServerSDK(t)
	ctx := context.Background()
	params := oai.CompletionNewParams{Model: "m", Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon a time")}}
	whole, err := sdk.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Choices) != 1 || countWords(whole.Choices[0].Text) != DefaultTextTokens || whole.Choices[0].FinishReason != "length" ||
		!strings.HasPrefix(whole.ID, "cmpl-") || whole.Usage.PromptTokens != 4 || whole.Usage.CompletionTokens != DefaultTextTokens {
		t.Errorf("completion without a limit: %+v; want %d words of text, finished for length, a cmpl- ID, 4 prompt tokens", whole, DefaultTextTokens)
	}
	if whole.Created != testNow.Unix() {
		t.Errorf("completion created %d, want the clock's %d", whole.Created, testNow.Unix())
	}
	params.MaxTokens = oai.Int(5)
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	stream := sdk.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var usage oai.CompletionUsage
	for stream.Next() {
		c := stream.Current()
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
		}
		if c.Created != testNow.Unix() {
			t.Errorf("streamed completion's chunk created %d, want the clock's %d", c.Created, testNow.Unix())
		}
		if c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if countWords(text.String()) != 5 || usage.PromptTokens != 4 || usage.CompletionTokens != 5 {
		t.Errorf("streamed completion: text %q, usage %+v; want 5 words, 4 prompt and 5 completion tokens", text.String(), usage)
	}
}

// TestModelServer_choices: a request for n completions gets n choices,
// whole or streamed, and usage for all of them, as from a real server.
func TestModelServer_choices(t *testing.T) {
	sdk := modelServerSDK(t)
	ctx := context.Background()
	params := oai.ChatCompletionNewParams{Model: "m", MaxTokens: oai.Int(4), N: oai.Int(3),
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Hello")}}
	whole, err := sdk.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	stream := sdk.Chat.Completions.NewStreaming(ctx, params, option.WithJSONSet("stream_options", map[string]any{"include_usage": true}))
	var acc oai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*oai.ChatCompletion{"whole": whole, "streamed": &acc.ChatCompletion} {
		if len(c.Choices) != 3 || c.Usage.CompletionTokens != 12 {
			t.Fatalf("%s: %d choices, usage %+v; want 3, and 12 completion tokens", name, len(c.Choices), c.Usage)
		}
		for k, ch := range c.Choices {
			if ch.Index != int64(k) || countWords(ch.Message.Content) != 4 || ch.Message.Role != "assistant" || ch.FinishReason != "length" {
				t.Errorf("%s: choice %d = %+v; want index %d, the assistant's 4 words, finished for length", name, k, ch, k)
			}
		}
	}
	params.N = oai.Int(maxChoices + 1)
	if _, err := sdk.Chat.Completions.New(ctx, params); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("n = %d: %v, want a 400", maxChoices+1, err)
	}
}

// TestModelServer_contentParts: a message whose content is a list of
// parts, as OpenAI's SDKs send text with an image, is a chat the
// simulated server answers, counting the text's words and each image as
// a low-detail one; a part of a type OpenAI's API has not is a 400.
func TestModelServer_contentParts(t *testing.T) {
	sdk := modelServerSDK(t)
	ctx := context.Background()
	parts := []oai.ChatCompletionContentPartUnionParam{
		oai.TextContentPart("What is in this picture"),
		oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,iVBORw0KGgo="}),
	}
	params := oai.ChatCompletionNewParams{Model: "m", MaxTokens: oai.Int(3), Messages: []oai.ChatCompletionMessageParamUnion{
		oai.SystemMessage("Be brief"), oai.UserMessage(parts)}}
	got, err := sdk.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2 + 5 + mediaPartTokens); got.Usage.PromptTokens != want || got.Usage.CompletionTokens != 3 {
		t.Errorf("usage %+v; want %d prompt tokens (2 + 5 words, an image) and 3 completion tokens", got.Usage, want)
	}
	_, err = sdk.Chat.Completions.New(ctx, params, option.WithJSONSet("messages.1.content.1.type", "hologram"))
	var e *oai.Error
	if !errors.As(err, &e) || e.StatusCode != 400 || !strings.Contains(e.Message, `"hologram"`) {
		t.Errorf("a hologram part: %v; want a 400 naming its type", err)
	}
}

// TestModelServer_responses: the simulated server serves the Responses
// API as vLLM does, whole and streamed: a message of as many words as
// max_output_tokens asks, cut there (incomplete), the instructions' and
// input's words counted, and the usage in the stream's last event.
func TestModelServer_responses(t *testing.T) {
	sdk := modelServerSDK(t)
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "m", Instructions: oai.String("Be brief"), MaxOutputTokens: oai.Int(6),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("What is an idle GPU", responses.EasyInputMessageRoleUser)}}}
	whole, err := sdk.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if countWords(whole.OutputText()) != 6 || whole.Status != "incomplete" || whole.IncompleteDetails.Reason != "max_output_tokens" ||
		!strings.HasPrefix(whole.ID, "resp_") || whole.Usage.InputTokens != 2+5 || whole.Usage.OutputTokens != 6 {
		t.Errorf("response: %q, %s, %+v; want 6 words, incomplete at max_output_tokens, a resp_ ID, 7 input tokens", whole.OutputText(), whole.Status, whole.Usage)
	}
	if int64(whole.CreatedAt) != testNow.Unix() {
		t.Errorf("response created_at %v, want the clock's %d", whole.CreatedAt, testNow.Unix())
	}
	stream := sdk.Responses.NewStreaming(ctx, params)
	var text strings.Builder
	var last responses.ResponseStreamEventUnion
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
		last = ev
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if countWords(text.String()) != 6 || last.Type != "response.incomplete" || last.Response.Usage.OutputTokens != 6 ||
		last.Response.OutputText() != text.String() || int64(last.Response.CreatedAt) != testNow.Unix() {
		t.Errorf("streamed: %q, last event %s with %q, usage %+v, created_at %v; want 6 words, then response.incomplete with them, the usage and the clock's time",
			text.String(), last.Type, last.Response.OutputText(), last.Response.Usage, last.Response.CreatedAt)
	}
	_, err = sdk.Responses.New(ctx, params, option.WithJSONSet("n", 2))
	var e *oai.Error
	if !errors.As(err, &e) || e.StatusCode != 400 {
		t.Errorf("a response with n: %v; want a 400, as the Responses API has no n", err)
	}
}

// TestModelServer_logprobs: asked, the simulated server gives each token
// of its answer its log probability, with as many alternatives as asked
// (the token itself the likeliest), whole and streamed, a chat's in its
// content list and a text completion's in the legacy lists; not asked,
// none. A bad ask is a 400.
func TestModelServer_logprobs(t *testing.T) {
	sdk := modelServerSDK(t)
	ctx := context.Background()
	params := oai.ChatCompletionNewParams{Model: "m", MaxTokens: oai.Int(3), Logprobs: oai.Bool(true), TopLogprobs: oai.Int(2),
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Hello")}}
	checkChat := func(what string, content []oai.ChatCompletionTokenLogprob) {
		t.Helper()
		if len(content) != 3 {
			t.Fatalf("%s: %d tokens' logprobs, want 3", what, len(content))
		}
		for _, lp := range content {
			if lp.Token != tokenWord || lp.Logprob != tokenLogprob || string(rune(lp.Bytes[0])) != "t" || len(lp.TopLogprobs) != 2 ||
				lp.TopLogprobs[0].Token != tokenWord || lp.TopLogprobs[1].Logprob >= lp.Logprob {
				t.Errorf("%s: %+v; want %q at %g, its 2 alternatives it first", what, lp, tokenWord, tokenLogprob)
			}
		}
	}
	whole, err := sdk.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	checkChat("whole", whole.Choices[0].Logprobs.Content)
	stream := sdk.Chat.Completions.NewStreaming(ctx, params)
	var streamed []oai.ChatCompletionTokenLogprob
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			streamed = append(streamed, ch.Logprobs.Content...)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	checkChat("streamed", streamed)
	plain, err := sdk.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: "m", MaxTokens: oai.Int(3),
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Hello")}})
	if err != nil || len(plain.Choices[0].Logprobs.Content) != 0 {
		t.Errorf("not asked: %v, logprobs %+v; want none", err, plain.Choices[0].Logprobs)
	}

	text := oai.CompletionNewParams{Model: "m", MaxTokens: oai.Int(4), Logprobs: oai.Int(1),
		Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once")}}
	done, err := sdk.Completions.New(ctx, text)
	if err != nil {
		t.Fatal(err)
	}
	if lp := done.Choices[0].Logprobs; len(lp.Tokens) != 4 || len(lp.TokenLogprobs) != 4 || lp.TokenLogprobs[3] != tokenLogprob ||
		len(lp.TopLogprobs) != 4 || lp.TopLogprobs[0][tokenWord] != tokenLogprob || len(lp.TopLogprobs[0]) != 1 || lp.TextOffset[2] != int64(2*len(tokenWord)) {
		t.Errorf("a text completion's logprobs %+v; want 4 tokens, each with its one alternative, at their offsets", lp)
	}
	textStream := sdk.Completions.NewStreaming(ctx, text)
	var offsets []int64
	for textStream.Next() {
		for _, ch := range textStream.Current().Choices {
			offsets = append(offsets, ch.Logprobs.TextOffset...)
		}
	}
	if err := textStream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(offsets) != 4 || offsets[3] != int64(3*len(tokenWord)) {
		t.Errorf("a streamed text completion's offsets %v; want 4, counted from the answer's start", offsets)
	}

	for name, opt := range map[string]option.RequestOption{
		"top_logprobs over 20":      option.WithJSONSet("top_logprobs", 21),
		"top_logprobs without them": option.WithJSONSet("logprobs", false),
		"logprobs not a boolean":    option.WithJSONSet("logprobs", "yes"),
	} {
		_, err := sdk.Chat.Completions.New(ctx, params, opt)
		if e := new(oai.Error); !errors.As(err, &e) || e.StatusCode != 400 {
			t.Errorf("%s: %v; want a 400", name, err)
		}
	}
}

// TestModelServer_stop: an answer ends where its first stop sequence
// would begin, leaving it out, finished "stop", whole or streamed, chat or
// text; the token the stop began in counts. A stop the answer never holds
// changes nothing; more than four, or one not a string, is a 400.
func TestModelServer_stop(t *testing.T) {
	sdk := modelServerSDK(t)
	ctx := context.Background()
	chat := func(stop ...string) oai.ChatCompletionNewParams {
		return oai.ChatCompletionNewParams{Model: "m", MaxTokens: oai.Int(10), Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Hello")},
			Stop: oai.ChatCompletionNewParamsStopUnion{OfStringArray: stop}}
	}
	whole, err := sdk.Chat.Completions.New(ctx, chat("\n", " tok"))
	if err != nil {
		t.Fatal(err)
	}
	if c := whole.Choices[0]; c.Message.Content != "tok" || c.FinishReason != "stop" || whole.Usage.CompletionTokens != 1 {
		t.Errorf("stopped at %q: %q, %s, %d tokens; want %q, stop, 1 token", " tok", c.Message.Content, c.FinishReason, whole.Usage.CompletionTokens, "tok")
	}
	if never, err := sdk.Chat.Completions.New(ctx, chat("\n")); err != nil || never.Choices[0].FinishReason != "length" || countWords(never.Choices[0].Message.Content) != 10 {
		t.Errorf("a stop it never says: %v, %+v; want all 10 words, for length", err, never)
	}
	stream := sdk.Completions.NewStreaming(ctx, oai.CompletionNewParams{Model: "m", MaxTokens: oai.Int(40),
		Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once")}, Stop: oai.CompletionNewParamsStopUnion{OfString: oai.String("k t")},
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}})
	var text strings.Builder
	var finish string
	var usage oai.CompletionUsage
	for stream.Next() {
		c := stream.Current()
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
		if c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "to" || finish != "stop" || usage.CompletionTokens != 1 {
		t.Errorf("a streamed text completion stopped at %q: %q, %s, usage %+v; want %q, stop, 1 token", "k t", text.String(), finish, usage, "to")
	}
	for name, opt := range map[string]option.RequestOption{
		"five stops":   option.WithJSONSet("stop", []string{"a", "b", "c", "d", "e"}),
		"a stop of 7":  option.WithJSONSet("stop", 7),
		"stops of 1,2": option.WithJSONSet("stop", []int{1, 2}),
	} {
		_, err := sdk.Chat.Completions.New(ctx, chat(), opt)
		if e := new(oai.Error); !errors.As(err, &e) || e.StatusCode != 400 {
			t.Errorf("%s: %v; want a 400", name, err)
		}
	}
}
