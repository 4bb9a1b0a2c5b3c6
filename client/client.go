// Package client is the public Go client of the idlegrid HTTP API.
//
// Client speaks for an account, with an API key; its methods mirror the
// coordinator's one to one. AgentClient speaks for a node, signing every
// request with the node's ed25519 key; the provider daemon uses it and
// nothing else to talk to the server.
//
// Errors the server answers come back as *idlegrid.Error with the server's
// code, field and message, so idlegrid.ErrorCode works on them. A server
// that cannot be reached gives an error that says where it was looked for.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// Timeouts of every request. A long poll gets its wait plus longPollMargin.
const (
	requestTimeout = 60 * time.Second
	longPollMargin = 15 * time.Second
	maxAnswerBytes = 32 << 20 // a larger answer is a broken server, not data
)

// httpClient is shared by every Client and AgentClient, so connections are
// reused. It has no overall Timeout: each request carries its own deadline
// in its context, which lets the long poll wait longer than the rest.
var httpClient = &http.Client{
	Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// transport sends requests to one server and turns its answers back into
// values and *idlegrid.Error. Client and AgentClient differ only in how they
// sign a request.
type transport struct {
	base    string // e.g. "http://127.0.0.1:7070", no trailing slash
	http    *http.Client
	setting string // where the caller sets base, for an error that cannot reach it
}

// The settings that name the server's address: the CLI's, and the agent's.
const (
	addrSetting   = "set --addr or IDLEGRID_ADDR"
	serverSetting = "set --server, or server: in the agent's config"
)

func newTransport(addr, setting string) transport {
	return transport{base: baseURL(addr), http: httpClient, setting: setting}
}

// baseURL accepts "host:port" as well as a full URL.
func baseURL(addr string) string {
	addr = strings.TrimSpace(addr)
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/")
}

// call is one API request.
type call struct {
	method  string
	path    string     // under the base URL, e.g. "/v1/jobs/job_x"
	query   url.Values // may be nil
	in      any        // the JSON body, or nil
	out     any        // where the JSON answer goes, or nil
	header  http.Header
	timeout time.Duration // 0: requestTimeout
	// answered, when not nil, gets the answer's status and headers: an
	// answer 304 (Not Modified, to a conditional request) is no error.
	answered *answerMeta
}

// answerMeta is the status and headers of an answer.
type answerMeta struct {
	status int
	header http.Header
}

// do sends c, with sign adding credentials to the finished request.
func (t transport) do(ctx context.Context, c call, sign func(req *http.Request, body []byte) error) error {
	var body []byte
	if c.in != nil {
		var err error
		if body, err = json.Marshal(c.in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = requestTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	u := t.base + c.path
	if len(c.query) > 0 {
		u += "?" + c.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u, bytes.NewReader(body))
	if err != nil {
		return idlegrid.Errorf(idlegrid.EINVALID, "bad server address %q: %v", t.base, err)
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "idlegrid-client/1")
	if c.in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := t.send(ctx, req, body, sign)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if c.answered != nil {
		*c.answered = answerMeta{resp.StatusCode, resp.Header}
		if resp.StatusCode == http.StatusNotModified {
			return nil
		}
	}
	return t.answer(resp, c.out)
}

// Retries of a request the server refused as over its account's rate
// limit (429, before doing anything with it): at most maxRateRetries,
// each after the Retry-After the server said if it is at most
// maxRateWait, and within the request's own time.
const (
	maxRateRetries = 3
	maxRateWait    = 10 * time.Second
)

// send signs req and sends it; a 429 with a short Retry-After is sent
// again after it.
func (t transport) send(ctx context.Context, req *http.Request, body []byte, sign func(req *http.Request, body []byte) error) (*http.Response, error) {
	for try := 0; ; try++ {
		if try > 0 {
			req.Body = http.NoBody
			if len(body) > 0 {
				req.Body = io.NopCloser(bytes.NewReader(body))
			}
		}
		if err := sign(req, body); err != nil {
			return nil, err
		}
		resp, err := t.http.Do(req)
		if err != nil {
			return nil, t.unreachable(ctx, err)
		}
		wait, ok := rateWait(resp)
		if dl, has := ctx.Deadline(); !ok || try == maxRateRetries || has && time.Until(dl) < wait {
			return resp, nil
		}
		resp.Body.Close()
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, t.unreachable(ctx, ctx.Err())
		}
	}
}

// rateWait is how long to wait before sending again a request resp
// refused as over a rate limit, when it said a wait short enough.
func rateWait(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || secs < 0 || time.Duration(secs)*time.Second > maxRateWait {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

// unreachable explains a request that got no answer.
func (t transport) unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err // the caller gave up; nothing to explain
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer from the idlegrid server at %s in time: %w", t.base, err)
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") { // net/http's words, no type
		plain := "http://" + strings.TrimPrefix(t.base, "https://")
		return fmt.Errorf("the server at %s speaks plain HTTP, not HTTPS: give its address as %s (%s): %w", t.base, plain, strings.TrimPrefix(t.setting, "set "), err)
	}
	return fmt.Errorf("cannot reach the idlegrid server (is the server running at %s? %s): %w", t.base, t.setting, err)
}

// answer decodes a response into out, or into the server's error.
func (t transport) answer(resp *http.Response, out any) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("read answer from %s: %w", t.base, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return t.decodeError(resp, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if raw, ok := out.(*[]byte); ok { // an answer that is not JSON, e.g. a CSV statement
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("unexpected answer from %s (is it an idlegrid server?): %w", t.base, err)
	}
	return nil
}

// errorBody is an error answer: the API's (wire.ErrorBody), or the
// gateway's in OpenAI's format, {"error":{"message","type","param","code"}},
// whose param names the field at fault where the API's says field.
type errorBody struct {
	Error struct {
		wire.ErrorDetail
		Param *string `json:"param"`
	} `json:"error"`
}

// decodeError turns an error answer back into the server's *idlegrid.Error.
// Something that is not the API's error body (a proxy's page, another
// program on the port) gets a generic error that says what came back.
func (t transport) decodeError(resp *http.Response, data []byte) error {
	var body errorBody
	if json.Unmarshal(data, &body) == nil && body.Error.Code != "" {
		e := body.Error
		if len(e.Problems) > 1 {
			ps := make([]*idlegrid.Error, len(e.Problems))
			for i, p := range e.Problems {
				ps[i] = fieldError(e.Code, p.Field, p.Message)
			}
			return idlegrid.Problems(ps)
		}
		field := e.Field
		if field == "" && e.Param != nil {
			field = *e.Param
		}
		return fieldError(e.Code, field, e.Message)
	}
	code := idlegrid.EINTERNAL
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		code = idlegrid.EUNAVAILABLE
	}
	snippet := strings.TrimSpace(string(data))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "…"
	}
	return idlegrid.Errorf(code, "unexpected answer %q from %s (is it an idlegrid server?): %s", resp.Status, t.base, snippet)
}

// Client calls the API with an account's API key. It is safe for
// concurrent use.
type Client struct {
	t      transport
	apiKey string
}

// New returns a client of the server at addr ("http://127.0.0.1:7070" or
// just "127.0.0.1:7070") that authenticates with apiKey.
func New(addr, apiKey string) *Client {
	return &Client{t: newTransport(addr, addrSetting), apiKey: apiKey}
}

func (c *Client) do(ctx context.Context, cl call) error {
	return c.t.do(ctx, cl, func(req *http.Request, _ []byte) error {
		if c.apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.apiKey)
		}
		return nil
	})
}

// path joins escaped segments under /v1.
func path(segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// fieldError is an error of the API's as *idlegrid.Error. The wire message
// carries "field: " in front for people reading raw JSON; *idlegrid.Error
// adds it back in Error().
func fieldError(code, field, msg string) *idlegrid.Error {
	if field != "" {
		msg = strings.TrimPrefix(msg, field+": ")
	}
	return &idlegrid.Error{Code: code, Field: field, Message: msg}
}
