package infersim

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/backoff"
)

// The speed model of a simulated provider. A model server that serves an
// 8B-parameter model in 16-bit weights (16 GB) on one GPU spends its time
// to first token on prefill, which is bound by the GPU's tensor FLOP/s
// (2 FLOPs per parameter per prompt token), and generates each further
// token in a decode step, which is bound by its memory bandwidth (the
// weights are read once per step). Real servers reach a fraction of the
// peak: modelFLOPsUtilisation of the FLOP/s in prefill and
// modelBandwidthUtilisation of the bandwidth in decode. Continuous
// batching lets concurrent requests share a decode step, so a request's
// speed does not fall with the node's load up to its MaxConcurrency; the
// agent refuses more (429).
const (
	modelParams               = 8e9
	modelBytes                = 2 * modelParams
	modelFLOPsUtilisation     = 0.5
	modelBandwidthUtilisation = 0.6
	// requestOverhead is the model server's own time per request
	// (tokenising, scheduling) before prefill starts.
	requestOverhead = 15 * time.Millisecond
	// maxStreamChunks bounds the events of one streamed answer: each
	// carries several tokens when the answer is longer, so that a 2,000
	// token answer does not cost the replaying machine 2,000 events.
	maxStreamChunks = 16
)

// GPU is a simulated provider's GPU: its name in gpu.Models and its peak
// figures, from ../shared/data/gpu-specs/ml_hardware.csv (Epoch AI's
// machine learning hardware table): "Tensor-FP16/BF16 performance
// (FLOP/s)" and "Memory bandwidth (byte/s)".
type GPU struct {
	Name            string
	TensorFLOPS     float64
	BandwidthBytesS float64
}

// GPUs are the GPUs the default fleet uses.
var GPUs = map[string]GPU{
	"H100-80GB": {Name: "H100-80GB", TensorFLOPS: 989.4e12, BandwidthBytesS: 3.35e12}, // NVIDIA H100 SXM5 80GB
	"A100-80GB": {Name: "A100-80GB", TensorFLOPS: 312e12, BandwidthBytesS: 2.039e12},  // NVIDIA A100 SXM4 80 GB
	"RTX4090":   {Name: "RTX4090", TensorFLOPS: 330e12, BandwidthBytesS: 1.008e12},    // NVIDIA GeForce RTX 4090
}

// PrefillTokensPerSecond is the prompt tokens g reads per second.
func (g GPU) PrefillTokensPerSecond() float64 {
	return g.TensorFLOPS * modelFLOPsUtilisation / (2 * modelParams)
}

// DecodeTokensPerSecond is the completion tokens g writes per second.
func (g GPU) DecodeTokensPerSecond() float64 {
	return g.BandwidthBytesS * modelBandwidthUtilisation / modelBytes
}

// Timing is how long g takes over a request, before any ServiceSpeedup:
// to its first token, and from there to its last.
func (g GPU) Timing(promptTokens, completionTokens int) (ttft, decode time.Duration) {
	ttft = requestOverhead + seconds(float64(promptTokens)/g.PrefillTokensPerSecond())
	if completionTokens > 1 {
		decode = seconds(float64(completionTokens-1) / g.DecodeTokensPerSecond())
	}
	return ttft, decode
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Faults are the shares of a provider's requests it fails, each way.
type Faults struct {
	Error500 float64 `json:"error_500"` // answers 500 after its request overhead
	Busy429  float64 `json:"busy_429"`  // answers 429 at once, as a full queue does
	Stall    float64 `json:"stall"`     // a stream stops after its first event; a whole answer never comes
	Drop     float64 `json:"drop"`      // the connection drops: mid-way through a stream, before a whole answer
}

// Fault kinds, as the report names them.
const (
	faultNone  = ""
	fault500   = "500"
	fault429   = "429"
	faultStall = "stall"
	faultDrop  = "drop"
)

// scaled returns f with every share times k, capped at 1 in all.
func (f Faults) scaled(k float64) Faults {
	f = Faults{f.Error500 * k, f.Busy429 * k, f.Stall * k, f.Drop * k}
	if sum := f.Error500 + f.Busy429 + f.Stall + f.Drop; sum > 1 {
		f = Faults{f.Error500 / sum, f.Busy429 / sum, f.Stall / sum, f.Drop / sum}
	}
	return f
}

// draw picks the fault of u, a uniform number in [0, 1).
func (f Faults) draw(u float64) string {
	for _, c := range []struct {
		share float64
		kind  string
	}{{f.Error500, fault500}, {f.Busy429, fault429}, {f.Stall, faultStall}, {f.Drop, faultDrop}} {
		if u < c.share {
			return c.kind
		}
		u -= c.share
	}
	return faultNone
}

// ProviderSpec is one simulated provider: one node with one GPU that
// serves every model of the replay from a simulated model server.
type ProviderSpec struct {
	Name           string `json:"name"`
	GPU            string `json:"gpu"` // a key of GPUs
	Region         string `json:"region"`
	Residency      string `json:"residency"`    // where its data stays, e.g. US or EU
	InputPrice     string `json:"input_price"`  // per million prompt tokens, e.g. "0.10"
	OutputPrice    string `json:"output_price"` // per million completion tokens
	MaxConcurrency int    `json:"max_concurrency"`
	Faults         Faults `json:"faults"`
}

// DefaultFleet is the fleet a replay runs against unless told otherwise:
// six providers in four regions on three GPUs, priced so that the
// cheapest ones are the least reliable and so draw the failover.
var DefaultFleet = []ProviderSpec{
	{Name: "sim-4090-flaky", GPU: "RTX4090", Region: "us-east", Residency: "US", InputPrice: "0.05", OutputPrice: "0.15", MaxConcurrency: 16, Faults: Faults{Error500: 0.15, Drop: 0.02}},
	{Name: "sim-4090-eu", GPU: "RTX4090", Region: "eu-west", Residency: "EU", InputPrice: "0.06", OutputPrice: "0.18", MaxConcurrency: 16, Faults: Faults{Busy429: 0.03, Stall: 0.01}},
	{Name: "sim-a100-us", GPU: "A100-80GB", Region: "us-west", Residency: "US", InputPrice: "0.10", OutputPrice: "0.30", MaxConcurrency: 48, Faults: Faults{Error500: 0.02}},
	{Name: "sim-a100-eu", GPU: "A100-80GB", Region: "eu-central", Residency: "EU", InputPrice: "0.11", OutputPrice: "0.33", MaxConcurrency: 48, Faults: Faults{Stall: 0.01, Drop: 0.01}},
	{Name: "sim-h100-us", GPU: "H100-80GB", Region: "us-east", Residency: "US", InputPrice: "0.18", OutputPrice: "0.54", MaxConcurrency: 96},
	{Name: "sim-h100-ap", GPU: "H100-80GB", Region: "ap-south", Residency: "IN", InputPrice: "0.20", OutputPrice: "0.60", MaxConcurrency: 96, Faults: Faults{Error500: 0.005}},
}

// provider is a running simulated provider: an OpenAI-compatible model
// server on loopback whose speed and faults follow its spec.
type provider struct {
	spec   ProviderSpec
	gpu    GPU
	faults Faults
	seed   uint64
	scale  float64 // ServiceSpeedup
	models map[string]bool

	srv  *http.Server
	url  string
	done chan struct{}

	mu      sync.Mutex
	stats   ProviderReport
	running map[string]int // requests being answered now, by model
	answers atomic.Int64   // answers numbered, for the IDs of those with no request ID
	run     string         // drawn at start, in those IDs, so that no two runs repeat one
	clock   idlegrid.Clock // stamps the answers' created
}

func startProvider(spec ProviderSpec, models []string, seed uint64, scale float64, clock idlegrid.Clock) (*provider, error) {
	g, ok := GPUs[spec.GPU]
	if !ok {
		return nil, fmt.Errorf("provider %s: unknown GPU %q", spec.Name, spec.GPU)
	}
	p := &provider{spec: spec, gpu: g, faults: spec.Faults, seed: seed, scale: scale, models: map[string]bool{},
		done: make(chan struct{}), running: map[string]int{}, run: strings.ToLower(rand.Text()[:8]), clock: clock}
	for _, m := range models {
		p.models[m] = true
	}
	p.stats = ProviderReport{Name: spec.Name, GPU: spec.GPU, Region: spec.Region, InputPrice: spec.InputPrice, OutputPrice: spec.OutputPrice,
		PrefillTokensPerSecond: g.PrefillTokensPerSecond(), DecodeTokensPerSecond: g.DecodeTokensPerSecond(), Faults: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", p.listModels)
	mux.HandleFunc("POST /v1/chat/completions", p.chat)
	mux.HandleFunc("POST /v1/completions", p.completion)
	mux.HandleFunc("POST /v1/responses", p.response)
	mux.HandleFunc("GET /metrics", p.metrics)
	p.srv = &http.Server{Handler: mux, ErrorLog: discardLog}
	p.url = "http://" + ln.Addr().String() + "/v1"
	go func() { defer close(p.done); p.srv.Serve(ln) }()
	return p, nil
}

// metrics serves the gauges vLLM's /metrics page has for its scheduler,
// in Prometheus' text format, per model: the requests being answered, and
// those waiting, always none, since the simulated server batches every
// request it is sent (the agent sends at most MaxConcurrency).
func (p *provider) metrics(w http.ResponseWriter, r *http.Request) {
	models := slices.Sorted(maps.Keys(p.models))
	running := make([]int, len(models))
	p.mu.Lock()
	for i, m := range models {
		running[i] = p.running[m]
	}
	p.mu.Unlock()
	var b strings.Builder
	b.WriteString("# HELP vllm:num_requests_running Number of requests in model execution batches.\n")
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	for i, m := range models {
		fmt.Fprintf(&b, "vllm:num_requests_running{model_name=%q} %d\n", m, running[i])
	}
	b.WriteString("# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n")
	b.WriteString("# TYPE vllm:num_requests_waiting gauge\n")
	for _, m := range models {
		fmt.Fprintf(&b, "vllm:num_requests_waiting{model_name=%q} 0\n", m)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	io.WriteString(w, b.String())
}

// close stops the model server, cutting what is still running.
func (p *provider) close() {
	p.srv.Close()
	<-p.done
}

func (p *provider) listModels(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	b.WriteString(`{"object":"list","data":[`)
	i := 0
	for m := range p.models {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%q,"object":"model","owned_by":"simulated"}`, m)
		i++
	}
	b.WriteString(`]}`)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, b.String())
}

// chatRequest is what a simulated provider reads of a request, a chat or
// a (legacy) text completion. User carries the replay's request ID, which
// the fault draw keys on.
type chatRequest struct {
	Model     string `json:"model"`
	Stream    bool   `json:"stream"`
	MaxTokens int    `json:"max_tokens"`
	// MaxCompletionTokens is max_tokens' newer name, which OpenAI's
	// SDKs send for chat; it wins when both are set.
	MaxCompletionTokens int    `json:"max_completion_tokens"`
	User                string `json:"user"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Content messageContent `json:"content"`
	} `json:"messages"`
	Prompt json.RawMessage `json:"prompt"` // a text completion's: a string, or a list of strings or of token IDs
	N      int             `json:"n"`      // completions to generate; 0 means 1
	// Logprobs asks for the answer's log probabilities: a chat's true or
	// false, with TopLogprobs alternatives per token; a text completion's
	// number of alternatives (logprobs.go).
	Logprobs    json.RawMessage `json:"logprobs"`
	TopLogprobs *int            `json:"top_logprobs"`
	// Stop is where the answer ends early: a string, or a list of up to
	// four (stop.go).
	Stop json.RawMessage `json:"stop"`
	// A response's (POST /v1/responses): its instructions, its input (a
	// string or a list of items) and its limit.
	Instructions    string        `json:"instructions"`
	Input           responseInput `json:"input"`
	MaxOutputTokens int           `json:"max_output_tokens"`

	text      bool  // a text completion (POST /v1/completions), not a chat
	responses bool  // a response (POST /v1/responses)
	created   int64 // when it arrived, in unix seconds: the answer's created (a response's created_at)
	logprobs  logprobsAsked
	stops     []string
	answer    string // a chat's or text completion's text, cut at a stop sequence (stopped)
	stopped   bool
}

func (p *provider) chat(w http.ResponseWriter, r *http.Request) { p.answer(w, r, chatRequest{}) }

// completion answers POST /v1/completions, as vLLM does: text, not a
// chat's message.
func (p *provider) completion(w http.ResponseWriter, r *http.Request) {
	p.answer(w, r, chatRequest{text: true})
}

// response answers POST /v1/responses, as vLLM does (responses.go).
func (p *provider) response(w http.ResponseWriter, r *http.Request) {
	p.answer(w, r, chatRequest{responses: true})
}

// answer answers a chat, a text completion or a response, as kind says:
// after the GPU's time for its prompt and answer, unless its fault draw
// says otherwise.
func (p *provider) answer(w http.ResponseWriter, r *http.Request, kind chatRequest) {
	req := kind
	req.created = p.clock.Now().Unix()
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON: "+err.Error())
		return
	}
	if !p.models[req.Model] {
		writeError(w, http.StatusNotFound, "invalid_request_error", "no model "+req.Model)
		return
	}
	switch {
	case req.N < 0 || req.N > maxChoices:
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("n must be between 1 and %d", maxChoices))
		return
	case req.N != 0 && req.responses:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "n is not a field of the Responses API")
		return
	}
	if !req.responses { // a response's logprobs are asked otherwise (include), and not simulated; it has no stop
		if err := errors.Join(req.readLogprobs(), req.readStop()); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
	}
	prompt := req.promptTokens()
	completion := req.answerTokens()
	if !req.responses {
		completion = req.cut(completion)
	}
	fault := p.faults.draw(unitHash(p.seed, p.spec.Name, req.User))
	p.begin(req.Model, fault)
	ttft, decode := p.gpu.Timing(prompt, completion)
	ttft, decode = p.scaled(ttft), p.scaled(decode)
	ok := false
	switch {
	case req.responses:
		ok = p.respond(w, r, &req, fault, prompt, completion, ttft, decode)
	case req.Stream:
		ok = p.stream(w, r, &req, fault, prompt, completion, ttft, decode)
	default:
		ok = p.whole(w, r, &req, fault, prompt, completion, ttft+decode)
	}
	p.end(req.Model, ok, prompt, completion*req.choices())
}

// maxChoices is the most completions (n) one request may ask for.
const maxChoices = 128

// choices is how many completions the request asks for (n).
func (r *chatRequest) choices() int { return max(r.N, 1) }

// DefaultAnswerTokens is how long a chat's answer is when the request
// sets no limit: a short paragraph, where a real model would stop of
// itself.
const DefaultAnswerTokens = 64

// DefaultTextTokens is a text completion's limit when the request sets
// none, as OpenAI's API and vLLM have it.
const DefaultTextTokens = 16

// promptTokens is the request's prompt in tokens: a word a token, and a
// token ID one.
func (r *chatRequest) promptTokens() int {
	n := 0
	for _, m := range r.Messages {
		n += m.Content.tokens
	}
	n += countWords(r.Instructions) + r.Input.tokens
	var one string
	var many []json.RawMessage
	switch {
	case json.Unmarshal(r.Prompt, &one) == nil:
		n += countWords(one)
	case json.Unmarshal(r.Prompt, &many) == nil:
		for _, p := range many {
			if json.Unmarshal(p, &one) == nil {
				n += countWords(one)
			} else {
				n++ // a token ID
			}
		}
	}
	return n
}

// mediaPartTokens is what the simulated server counts an image, audio
// or file part of a message as: OpenAI's cost of a low-detail image.
const mediaPartTokens = 85

// messageContent is a chat message's content, or a response's input
// message's, as the simulated server counts it: a string, null (an
// assistant's tool calls), or a list of parts, text or media, as OpenAI's
// API takes them.
type messageContent struct{ tokens int }

func (c *messageContent) UnmarshalJSON(b []byte) error {
	var text *string
	if json.Unmarshal(b, &text) == nil {
		if text != nil {
			c.tokens = countWords(*text)
		}
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("content must be a string or a list of content parts")
	}
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text", "reasoning_text", "summary_text": // a chat's, then a response's
			c.tokens += countWords(p.Text)
		case "image_url", "input_audio", "file", "input_image", "input_file":
			c.tokens += mediaPartTokens
		case "refusal": // an earlier answer's refusal, in its own field: no text counted
		default:
			return fmt.Errorf("unknown content part type %q", p.Type)
		}
	}
	return nil
}

// answerTokens is how many tokens the answer has: the request's limit,
// a response's max_output_tokens, max_completion_tokens or else
// max_tokens, or the default.
func (r *chatRequest) answerTokens() int {
	switch {
	case r.MaxOutputTokens > 0:
		return r.MaxOutputTokens
	case r.MaxCompletionTokens > 0:
		return r.MaxCompletionTokens
	case r.MaxTokens > 0:
		return r.MaxTokens
	case r.text:
		return DefaultTextTokens
	}
	return DefaultAnswerTokens
}

func (p *provider) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / p.scale)
}

// whole answers a non-streamed request once it is complete.
func (p *provider) whole(w http.ResponseWriter, r *http.Request, req *chatRequest, fault string, prompt, completion int, took time.Duration) bool {
	switch fault {
	case fault429:
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", "queue full")
		return false
	case fault500:
		backoff.Sleep(r.Context(), p.scaled(requestOverhead))
		writeError(w, http.StatusInternalServerError, "server_error", "CUDA error: an illegal memory access was encountered")
		return false
	case faultStall:
		<-r.Context().Done()
		return false
	}
	if !backoff.Sleep(r.Context(), took) {
		return false
	}
	if fault == faultDrop {
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	format, object := `{"index":%d,"message":{"role":"assistant","content":%q},"logprobs":%s,"finish_reason":%q}`, "chat.completion"
	if req.text {
		format, object = `{"index":%d,"text":%q,"logprobs":%s,"finish_reason":%q}`, "text_completion"
	}
	choices := make([]string, req.choices())
	logprobs, finish := req.logprobsJSON(completion, 0), req.finishReason() // every choice's the same
	for k := range choices {
		choices[k] = fmt.Sprintf(format, k, req.answer, logprobs, finish)
	}
	out := completion * len(choices)
	fmt.Fprintf(w, `{"id":%q,"object":%q,"created":%d,"model":%q,"choices":[%s],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		p.answerID(req), object, req.created, req.Model, strings.Join(choices, ","), prompt, out, prompt+out)
	return true
}

// finishReason is why the answer ended, as a real model server says: a
// stop sequence, its length reached the request's limit (a text
// completion's default one too), or, with none set, the model stopped of
// itself (after DefaultAnswerTokens).
func (r *chatRequest) finishReason() string {
	if r.stopped {
		return "stop"
	}
	if r.MaxOutputTokens > 0 || r.MaxCompletionTokens > 0 || r.MaxTokens > 0 || r.text {
		return "length"
	}
	return "stop"
}

// answerID is the ID of the answer to req: chatcmpl- (cmpl- for a text
// completion, resp_ for a response) and the replay's request ID, or when
// it sent none the provider's name, its run's tag and a number.
func (p *provider) answerID(req *chatRequest) string {
	prefix := "chatcmpl-"
	switch {
	case req.text:
		prefix = "cmpl-"
	case req.responses:
		prefix = "resp_"
	}
	if req.User != "" {
		return prefix + req.User
	}
	return fmt.Sprintf("%s%s-%s-%d", prefix, p.spec.Name, p.run, p.answers.Add(1))
}

// stream answers a streamed request: its first events at ttft, the rest
// spread evenly over decode (an event for each of the n completions each
// time), then the usage, when the request asked for it, and [DONE].
func (p *provider) stream(w http.ResponseWriter, r *http.Request, req *chatRequest, fault string, prompt, completion int, ttft, decode time.Duration) bool {
	switch fault {
	case fault429, fault500:
		return p.whole(w, r, req, fault, prompt, completion, 0)
	}
	if !backoff.Sleep(r.Context(), ttft) {
		return false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	chunks := min(completion, maxStreamChunks)
	id := p.answerID(req)
	sent := 0 // tokens of each completion in the chunks before
	for i := range chunks {
		if i > 0 && !backoff.Sleep(r.Context(), decode/time.Duration(chunks-1)) {
			return false
		}
		n := completion/chunks + boolInt(i < completion%chunks)
		finish := "null"
		if i == chunks-1 {
			finish = strconv.Quote(req.finishReason())
		}
		for k := range req.choices() {
			req.writeChunk(w, id, k, i == 0, n, sent, finish)
		}
		sent += n
		if rc.Flush() != nil {
			return false
		}
		switch {
		case fault == faultStall && i == 0:
			<-r.Context().Done()
			return false
		case fault == faultDrop && i == chunks/2:
			panic(http.ErrAbortHandler)
		}
	}
	if req.StreamOptions.IncludeUsage { // as real servers, only when asked (the gateway always asks)
		out := completion * req.choices()
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":%q,\"created\":%d,\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n",
			id, req.chunkObject(), req.created, req.Model, prompt, out, prompt+out)
	}
	io.WriteString(w, "data: [DONE]\n\n")
	return true
}

// chunkObject is the object of a streamed answer's events.
func (r *chatRequest) chunkObject() string {
	if r.text {
		return "text_completion"
	}
	return "chat.completion.chunk"
}

// writeChunk writes one event of a streamed answer with text for its
// completion index: a chat's delta, the assistant's role on the first,
// or a text completion's text: n tokens, after the sent before, with
// their log probabilities when the request asked.
func (r *chatRequest) writeChunk(w io.Writer, id string, index int, first bool, n, sent int, finish string) {
	text, logprobs := r.part(sent, n), r.logprobsJSON(n, sent)
	if r.text {
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"text_completion\",\"created\":%d,\"model\":%q,\"choices\":[{\"index\":%d,\"text\":%q,\"logprobs\":%s,\"finish_reason\":%s}]}\n\n", id, r.created, r.Model, index, text, logprobs, finish)
		return
	}
	role := ""
	if first {
		role = `"role":"assistant",`
	}
	fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":%d,\"model\":%q,\"choices\":[{\"index\":%d,\"delta\":{%s\"content\":%q},\"logprobs\":%s,\"finish_reason\":%s}]}\n\n", id, r.created, r.Model, index, role, text, logprobs, finish)
}

// begin and end count a request as it arrives and as it ends.
func (p *provider) begin(model, fault string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[model]++
	p.stats.Calls++
	if fault != faultNone {
		p.stats.Faults[fault]++
	}
}

func (p *provider) end(model string, ok bool, prompt, completion int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[model]--
	if !ok {
		return
	}
	p.stats.Served++
	p.stats.InputTokens += int64(prompt)
	p.stats.OutputTokens += int64(completion)
}

func (p *provider) report() ProviderReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.stats
	r.Faults = map[string]int{}
	for k, v := range p.stats.Faults {
		r.Faults[k] = v
	}
	return r
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}

// tokenWord is one token of a simulated prompt or answer. A simulated
// model server's tokenizer counts words, and four bytes a word is also
// what the gateway's estimate (openai.BytesPerToken) counts, so a stream
// cut off before its usage is metered at about its true size.
const tokenWord = "tok "

func words(n int) string { return strings.Repeat(tokenWord, n) }

func countWords(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		sp := s[i] == ' ' || s[i] == '\n' || s[i] == '\t'
		if !sp && !in {
			n++
		}
		in = !sp
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unitHash is a uniform number in [0, 1) fixed by its inputs: the same
// seed gives every request the same fault at the same provider, and the
// same choice of streaming, whatever the timing.
func unitHash(seed uint64, parts ...string) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	x := h.Sum64() // FNV spreads nearby inputs poorly; splitmix64's finaliser mixes them
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// ModelServer is a simulated OpenAI-compatible model server, named so: it
// answers chat completions with filler words, as long as max_tokens (or
// max_completion_tokens) asks, DefaultAnswerTokens when neither is set,
// in the time its GPU's speed model gives, with no faults. "idlegrid dev"
// serves its demo model from these.
type ModelServer struct{ p *provider }

// StartModelServer starts a simulated model server of gpu (a key of GPUs)
// on loopback that serves models, stamping its answers by clock.
func StartModelServer(gpu string, models []string, clock idlegrid.Clock) (*ModelServer, error) {
	p, err := startProvider(ProviderSpec{Name: "sim-" + gpu, GPU: gpu}, models, 1, 1, clock)
	if err != nil {
		return nil, err
	}
	return &ModelServer{p}, nil
}

// URL is the base URL of its OpenAI API, ending in /v1.
func (s *ModelServer) URL() string { return s.p.url }

// Close stops it, cutting what is still running.
func (s *ModelServer) Close() { s.p.close() }
