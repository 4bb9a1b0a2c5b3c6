package infersim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid/internal/backoff"
)

// result is what the renter saw of one request.
type result struct {
	req       Request
	index     int
	stream    bool
	status    int    // the gateway's HTTP status; 0 when none came
	errType   string // the OpenAI error type, or how the request broke
	requestID string // X-Request-Id: the usage record's ID
	nodeID    string // X-Idlegrid-Node: who served it
	complete  bool   // the whole answer arrived, with its usage
	inTokens  int64  // usage the renter was told
	outTokens int64
	latency   time.Duration // sent to last byte
	ttft      time.Duration // sent to first byte of the body
}

// replay sends every request at its arrival time, each from its own
// goroutine, and waits for them all and for the meter.
func (m *market) replay(ctx context.Context) ([]result, time.Duration, error) {
	reqs := m.cfg.Requests
	results := make([]result, len(reqs))
	clients := map[string]*renterClient{}
	for svc, r := range m.renters {
		clients[svc] = newRenterClient(m.url, r.key, 4096)
	}
	var wg sync.WaitGroup
	var inflight, finished atomic.Int64
	stopProgress := m.progress(len(reqs), &inflight, &finished)
	start := time.Now()
	for i, r := range reqs {
		at := start.Add(time.Duration(float64(r.Offset) / m.cfg.Speedup))
		if !backoff.Sleep(ctx, time.Until(at)) {
			break
		}
		stream := unitHash(m.cfg.Seed, "stream", strconv.Itoa(i)) < m.cfg.StreamShare
		inflight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = clients[r.Service].send(ctx, i, r, stream)
			inflight.Add(-1)
			finished.Add(1)
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	stopProgress()
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := m.gw.Sync(sctx); err != nil {
		return nil, 0, fmt.Errorf("wait for the gateway's meter: %w", err)
	}
	return results, wall, nil
}

// progress prints a line every five seconds until stopped.
func (m *market) progress(total int, inflight, finished *atomic.Int64) (stop func()) {
	if m.cfg.Progress == nil {
		return func() {}
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(m.cfg.Progress, "infersim: %d of %d requests done, %d in flight\n", finished.Load(), total, inflight.Load())
			}
		}
	}()
	return func() { close(done); <-ended }
}

// renterClient sends a renter's requests to the gateway over plain HTTP,
// as any OpenAI client does.
type renterClient struct {
	base, key string
	http      *http.Client
}

func newRenterClient(base, key string, conns int) *renterClient {
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute, DisableCompression: true}
	return &renterClient{base: base + "/v1/", key: key, http: &http.Client{Transport: tr}}
}

// chatBody is the request of trace row r: a prompt of r.ContextTokens
// words (at least 1) and max_tokens r.GeneratedTokens (at least 1). The
// prompt's first word, and User, name the request: the trace has no
// prompts, so no two share a prefix for sticky routing to follow, and a
// provider's fault draw is the same in every run.
func chatBody(i int, r Request, stream bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"model":%q,"user":"%s-%d","max_tokens":%d,"stream":%t,`, ModelFor(r.Service), r.Service, i, max(r.GeneratedTokens, 1), stream)
	if stream {
		b.WriteString(`"stream_options":{"include_usage":true},`)
	}
	fmt.Fprintf(&b, `"messages":[{"role":"user","content":"%s-%d`, r.Service, i)
	if r.ContextTokens > 1 {
		b.WriteByte(' ')
		b.WriteString(strings.TrimSuffix(words(r.ContextTokens-1), " "))
	}
	b.WriteString(`"}]}`)
	return b.Bytes()
}

func (c *renterClient) send(ctx context.Context, i int, r Request, stream bool) result {
	res := result{req: r, index: i, stream: stream}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"chat/completions", bytes.NewReader(chatBody(i, r, stream)))
	if err != nil {
		res.errType = "request: " + err.Error()
		return res
	}
	hr.Header.Set("Authorization", "Bearer "+c.key)
	hr.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := c.http.Do(hr)
	if err != nil {
		res.errType = "transport"
		res.latency = time.Since(sent)
		return res
	}
	defer resp.Body.Close()
	res.status = resp.StatusCode
	res.requestID = resp.Header.Get("X-Request-Id")
	res.nodeID = resp.Header.Get("X-Idlegrid-Node")
	if resp.StatusCode != http.StatusOK || !stream {
		body, err := io.ReadAll(resp.Body)
		res.ttft = time.Since(sent)
		res.latency = res.ttft
		if err != nil {
			res.errType = "broken"
			return res
		}
		res.readWhole(body)
		return res
	}
	res.readStream(resp.Body, sent)
	return res
}

// usageBody is the usage field of an answer or of a stream's last event.
type usageBody struct {
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Type string `json:"type"`
	} `json:"error"`
}

func (res *result) readWhole(body []byte) {
	var u usageBody
	if err := json.Unmarshal(body, &u); err != nil {
		res.errType = "bad JSON"
		return
	}
	if res.status != http.StatusOK {
		res.errType = "unknown"
		if u.Error != nil {
			res.errType = u.Error.Type
		}
		return
	}
	if u.Usage != nil {
		res.complete, res.inTokens, res.outTokens = true, u.Usage.PromptTokens, u.Usage.CompletionTokens
	}
}

// readStream reads a stream's events to [DONE], keeping the usage.
func (res *result) readStream(body io.Reader, sent time.Time) {
	br := bufio.NewReaderSize(body, 64<<10)
	first, done := true, false
	for {
		line, err := br.ReadSlice('\n')
		if first && len(line) > 0 {
			res.ttft, first = time.Since(sent), false
		}
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok {
			if string(data) == "[DONE]" {
				done = true
			} else if bytes.Contains(data, []byte(`"usage"`)) {
				var u usageBody
				if json.Unmarshal(data, &u) == nil && u.Usage != nil {
					res.inTokens, res.outTokens = u.Usage.PromptTokens, u.Usage.CompletionTokens
				} else if u.Error != nil {
					res.errType = u.Error.Type
				}
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		} else if err != nil {
			break
		}
	}
	res.latency = time.Since(sent)
	res.complete = done && res.errType == "" && (res.inTokens > 0 || res.outTokens > 0)
	if !res.complete && res.errType == "" {
		res.errType = "broken stream"
	}
}

// providersOf returns the fewest providers the gateway lists for any of
// models.
func (c *renterClient) providersOf(ctx context.Context, models []string) (int, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"models", nil)
	if err != nil {
		return 0, err
	}
	hr.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.http.Do(hr)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var page struct {
		Data []struct {
			ID        string `json:"id"`
			Providers int    `json:"providers"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return 0, err
	}
	fewest := -1
	for _, want := range models {
		n := 0
		for _, d := range page.Data {
			if d.ID == want {
				n = d.Providers
			}
		}
		if fewest < 0 || n < fewest {
			fewest = n
		}
	}
	return max(fewest, 0), nil
}
