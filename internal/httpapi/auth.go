package httpapi

import (
	"bytes"
	"crypto/ed25519"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// errBadKey is the one answer to a key that does not authenticate, whatever
// the reason, so that a caller learns nothing about which keys exist.
var errBadKey = idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "invalid or revoked API key")

// withKey authenticates the request's bearer API key and puts the caller in
// its context. Authorisation is the server's business, but for one rule
// that is the API's: a key with access read may only read, which here is
// GET (and HEAD, which GET routes answer); the server holds the other
// accesses (idlegrid.Caller.Allow).
func (a *api) withKey(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		secret, err := bearer(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="idlegrid"`)
			return err
		}
		caller, err := a.srv.AuthenticateKey(r.Context(), secret)
		if idlegrid.ErrorCode(err) == idlegrid.EUNAUTHORIZED {
			w.Header().Set("WWW-Authenticate", `Bearer realm="idlegrid", error="invalid_token"`)
			return errBadKey
		} else if err != nil {
			return err
		}
		if err := a.opts.AccountLimits.Admit(caller, a.srv.Now()); err != nil {
			return err
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := caller.Allow(idlegrid.AccessUse); err != nil {
				return err
			}
		}
		return next(w, r.WithContext(idlegrid.NewContextWithCaller(r.Context(), caller)))
	}
}

// bearer returns the secret of an "Authorization: Bearer <secret>" header.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "missing API key; send the header Authorization: Bearer <key>")
	}
	scheme, secret, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return "", idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "the Authorization header must be Bearer <key>")
	}
	return strings.TrimSpace(secret), nil
}

// checkProtocol refuses agents that speak another protocol version, telling
// them what to do about it.
func checkProtocol(r *http.Request) error {
	got := r.Header.Get(nodekey.HeaderProtocol)
	if got == strconv.Itoa(idlegrid.ProtocolVersion) {
		return nil
	}
	if got == "" {
		got = "none"
	}
	return &idlegrid.Error{Code: idlegrid.EINVALID, Field: nodekey.HeaderProtocol, Message: "this server speaks agent protocol " +
		strconv.Itoa(idlegrid.ProtocolVersion) + " but the agent sent " + got + "; upgrade the agent (or the server) so that both speak the same version"}
}

// verifySigned checks that pub signed r's method, path, query, time and
// body, at a time close to the server's clock. The body, already read, is
// put back on r so that the handler can decode it.
func (a *api) verifySigned(r *http.Request, pub ed25519.PublicKey, body []byte) error {
	now, sig := a.srv.Now(), r.Header.Get(nodekey.HeaderSignature)
	err := nodekey.Verify(pub, r.Method, r.URL.RequestURI(), r.Header.Get(nodekey.HeaderTime), body, sig, now)
	if err != nil {
		return idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "%v", err)
	}
	ms, _ := strconv.ParseInt(r.Header.Get(nodekey.HeaderTime), 10, 64) // Verify parsed it
	if !a.seen.first(sig, time.UnixMilli(ms), now) {
		return idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "this signed request was %s: a node signs each request anew; one sent again is refused", nodekey.ReplayWords)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// withNode authenticates a request signed by a node that has joined, and
// puts the node in the request's context as the caller.
func (a *api) withNode(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := checkProtocol(r); err != nil {
			return err
		}
		nodeID := r.Header.Get(nodekey.HeaderNode)
		if nodeID == "" {
			return idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "missing %s header; a node must join before it can call the agent API", nodekey.HeaderNode)
		} else if !idlegrid.IsText(nodeID) {
			return idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "the %s header is not a node ID; join again with a new join token", nodekey.HeaderNode)
		}
		pub, providerID, err := a.srv.NodeIdentity(r.Context(), nodeID) // before the body: no node, no read
		if err != nil {
			return err
		}
		body, err := readBody(w, r, a.opts.MaxBodyBytes)
		if err != nil {
			return err
		}
		if err := a.verifySigned(r, pub, body); err != nil {
			return err
		}
		caller := &idlegrid.Caller{NodeID: nodeID, AccountID: providerID, Role: idlegrid.RoleProvider}
		return next(w, r.WithContext(idlegrid.NewContextWithCaller(r.Context(), caller)))
	}
}

// withJoinSignature authenticates a join: the request must be signed by the
// key in its public-key header, which must also be the key in the body (the
// handler checks that, having decoded the body).
func (a *api) withJoinSignature(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := checkProtocol(r); err != nil {
			return err
		}
		pub, err := nodekey.ParsePublic(r.Header.Get(nodekey.HeaderPublicKey))
		if err != nil {
			return idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "a join must carry the node's public key in %s: %v", nodekey.HeaderPublicKey, err)
		}
		body, err := readBody(w, r, a.opts.MaxBodyBytes)
		if err != nil {
			return err
		}
		if err := a.verifySigned(r, pub, body); err != nil {
			return err
		}
		return next(w, r)
	}
}
