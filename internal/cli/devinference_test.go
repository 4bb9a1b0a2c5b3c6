package cli

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestDevCaller_call(t *testing.T) {
	var asked struct {
		Model           string `json:"model"`
		MaxTokens       int    `json:"max_tokens"`
		MaxOutputTokens int    `json:"max_output_tokens"`
		Previous        string `json:"previous_response_id"`
	}
	var path string
	busy := false
	responses := 1
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer igk_renter" {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		path, asked.MaxTokens, asked.MaxOutputTokens, asked.Previous = r.URL.Path, 0, 0, ""
		json.NewDecoder(r.Body).Decode(&asked)
		if busy {
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":{"message":"every provider of model \"sim-8b-instruct\" stayed at capacity for 10s; retry shortly","type":"rate_limit_error"}}`))
			return
		}
		w.Header().Set("X-Idlegrid-Node", "node_1")
		if path == "/v1/responses" {
			w.Write([]byte(`{"id":"resp_` + strconv.Itoa(responses) + `","object":"response","output":[],"usage":{"input_tokens":5,"output_tokens":3}}`))
			responses++
			return
		}
		w.Write([]byte(`{"choices":[{"message":{"content":"tok tok"}}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`))
	}))
	defer gw.Close()
	c := &devCaller{url: gw.URL, key: "igk_renter", rand: rand.New(rand.NewPCG(1, 2)), http: gw.Client(),
		nodeName: func(id string) string { return map[string]string{"node_1": "nb-h100-01"}[id] }}

	msg, err := c.call(context.Background())
	if err != nil || !regexp.MustCompile(`^renter called sim-8b-instruct: 2 tokens in (\d+ms|0s) on nb-h100-01$`).MatchString(msg) {
		t.Errorf("call = %q, %v", msg, err)
	}
	if path != "/v1/chat/completions" || asked.Model != devModelName || asked.MaxTokens < 16 || asked.MaxTokens > 128 {
		t.Errorf("asked %s %+v, want a chat of the demo model and 16–128 tokens", path, asked)
	}
	busy = true
	if _, err := c.call(context.Background()); err == nil || !strings.Contains(err.Error(), "429 Too Many Requests: every provider") {
		t.Errorf("a refused call: %v, want the status and the gateway's message", err)
	}
	busy = false
	msg, err = c.call(context.Background()) // the third: a response
	if err != nil || !regexp.MustCompile(`^renter called sim-8b-instruct \(Responses API\): 3 tokens in (\d+ms|0s) on nb-h100-01$`).MatchString(msg) ||
		path != "/v1/responses" || asked.MaxOutputTokens < 16 || asked.MaxOutputTokens > 128 || asked.Previous != "" {
		t.Errorf("the third call = %q, %v, asked %s %+v; want a response of 16–128 tokens, its usage said", msg, err, path, asked)
	}
	for range 3 {
		msg, err = c.call(context.Background())
	}
	if err != nil || !strings.Contains(msg, "(Responses API, continuing resp_1)") || path != "/v1/responses" || asked.Previous != "resp_1" {
		t.Errorf("the sixth call = %q, %v, asked %s %+v; want a response continuing the first, resp_1", msg, err, path, asked)
	}
}
