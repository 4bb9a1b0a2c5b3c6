package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// devCaller is the demo renter's inference: every so often it calls the
// demo model through the gateway, as an application with an OpenAI client
// would, so that the dashboard's inference panel and idlegrid inference
// stats have something to show.
type devCaller struct {
	url, key string
	every    time.Duration
	rand     *rand.Rand
	report   func(msg string)
	nodeName func(id string) string
	http     *http.Client
	calls    int    // made so far: every third is a response (POST /v1/responses), the rest chats
	previous string // the last response's ID, which every other response continues; "" for none
}

// devCallEvery is how often the demo renter calls the demo model.
const devCallEvery = 15 * time.Second

// run calls the model until ctx is done.
func (c *devCaller) run(ctx context.Context) {
	for {
		gap := c.every/2 + time.Duration(c.rand.Int64N(int64(c.every)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		if msg, err := c.call(ctx); err != nil && ctx.Err() == nil {
			c.report("renter's inference call failed: " + err.Error())
		} else if err == nil {
			c.report(msg)
		}
	}
}

// devPrompts are what the demo renter asks.
var devPrompts = []string{
	"Summarise this support ticket in one line.",
	"Translate 'the GPU is idle tonight' into German.",
	"Write a haiku about spot instances.",
	"Classify the sentiment of: the job finished early and cheap.",
}

// next is the next call: its endpoint, what the report says of it, and
// its body, asking for 16 to 128 tokens.
func (c *devCaller) next() (endpoint, via string, body []byte) {
	c.calls++
	maxTokens := 16 + c.rand.IntN(113)
	prompt := devPrompts[c.rand.IntN(len(devPrompts))]
	if c.calls%3 == 0 {
		r := map[string]any{"model": devModelName, "input": prompt, "max_output_tokens": maxTokens}
		via = " (Responses API)"
		if c.calls%6 == 0 && c.previous != "" {
			r["previous_response_id"] = c.previous
			via = " (Responses API, continuing " + c.previous + ")"
		}
		body, _ = json.Marshal(r)
		return "responses", via, body
	}
	body, _ = json.Marshal(map[string]any{
		"model":      devModelName,
		"messages":   []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens": maxTokens,
	})
	return "chat/completions", "", body
}

// call sends one chat completion, or every third call a response (every
// other one continuing the last, previous_response_id), and says what came
// back.
func (c *devCaller) call(ctx context.Context) (string, error) {
	endpoint, via, body := c.next()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/v1/"+endpoint, strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	var out struct {
		ID    string `json:"id"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
			OutputTokens     int `json:"output_tokens"` // a response's
		} `json:"usage"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(answer, &out); err != nil {
		return "", fmt.Errorf("%s: %s", resp.Status, clip(string(answer), 120))
	} else if resp.StatusCode != http.StatusOK {
		c.previous = "" // a conversation that cannot go on starts again
		return "", fmt.Errorf("%s: %s", resp.Status, out.Error.Message)
	}
	if endpoint == "responses" {
		c.previous = out.ID
	}
	return fmt.Sprintf("renter called %s%s: %d tokens in %s on %s", devModelName, via, out.Usage.CompletionTokens+out.Usage.OutputTokens,
		time.Since(began).Round(time.Millisecond), c.nodeName(resp.Header.Get("X-Idlegrid-Node"))), nil
}
