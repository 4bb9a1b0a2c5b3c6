package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// DialOptions say how an agent reaches the server and what it answers on
// the session.
type DialOptions struct {
	// NodeID is the node the agent speaks for; the ping answers it.
	NodeID string
	// Header goes with the upgrade request: the node's signature of
	// GET Path, as on every agent request.
	Header http.Header
	// HTTPClient sends the upgrade request. It must speak HTTP/1.1 (a
	// WebSocket cannot ride HTTP/2) and have no Timeout. Nil: a client of
	// the package's own, with the proxy from the environment.
	HTTPClient *http.Client
	// Handler serves the server's requests on the session, beside the
	// ping, which the session answers itself. Nil: the ping only.
	Handler http.Handler
	Config
}

// dialClient is the default HTTPClient of Dial: HTTP/1.1 only.
var dialClient = &http.Client{
	Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		// A server that takes the upgrade request and never answers it
		// fails the dial even under a context without a deadline.
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       time.Minute,                                            // the connection of a refused dial
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{}, // no HTTP/2
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Dial opens a session to the server at serverURL ("http://host:port" or
// "https://host", with any path prefix the API lives under) for the node
// o.NodeID. A server that answers anything but the upgrade gives a
// *RefusedError, which matches ErrNotOffered when the answer was 404. The
// session lives until it is closed or its connection fails; ctx bounds only
// the dial.
func Dial(ctx context.Context, serverURL string, o DialOptions) (*Session, error) {
	if o.NodeID == "" {
		return nil, errors.New("dial session: no node ID; join first")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = dialClient
	}
	u := strings.TrimRight(serverURL, "/") + Path
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient:      o.HTTPClient,
		HTTPHeader:      o.Header,
		Subprotocols:    []string{Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(resp.Body) // Dial kept at most 1 KiB of it
			}
			return nil, &RefusedError{StatusCode: resp.StatusCode, Status: resp.Status, Body: body}
		}
		return nil, fmt.Errorf("dial session at %s: %w", u, err)
	}
	if ws.Subprotocol() != Subprotocol {
		ws.Close(websocket.StatusProtocolError, "expected subprotocol "+Subprotocol)
		return nil, fmt.Errorf("dial session at %s: the server does not speak %s", u, Subprotocol)
	}
	// The session, not ctx, decides when the connection ends.
	conn := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	return newSession(conn, true, o.NodeID, agentHandler(o.NodeID, o.Handler), o.Config)
}
