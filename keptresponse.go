package idlegrid

import (
	"context"
	"encoding/json"
	"time"
)

// KeptResponse is an answer of the Responses API (POST /v1/responses)
// that the gateway keeps for its renter, as OpenAI keeps them, unless the
// request said store false: a later request may continue the conversation
// from it (previous_response_id), and the renter may read it back, list
// its input items, or delete it. It is kept by the coordinator, not by the
// provider that answered it: the next request of the conversation may go
// to another provider, which is sent the conversation whole.
type KeptResponse struct {
	// ID is the gateway's, "resp_…": the digits of its request's ID
	// (InferenceUsage.ID).
	ID       string `json:"id"`
	RenterID string `json:"renter_id"`
	Model    string `json:"model"`
	// PreviousID is the response it continued (its request's
	// previous_response_id); "" for the first of a conversation.
	PreviousID string `json:"previous_id,omitempty"`
	// Input is its request's own input items, a JSON array (an input
	// given as a string is kept as one user message). The items of the
	// responses it continued are theirs, not repeated here.
	Input json.RawMessage `json:"input"`
	// Response is the response object as the renter got it, its output
	// items included.
	Response  json.RawMessage `json:"response"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	// HeldUntil is, for a background response, how long the server that
	// runs it vouches for its run: the run renews it while the response
	// is queued or in progress (HoldResponse), so one still unfinished
	// after it lost its run to a stopped server. Zero for a response
	// answered whole.
	HeldUntil time.Time `json:"held_until,omitzero"`
}

// Validate checks a kept response before it is stored.
func (r *KeptResponse) Validate() error {
	switch {
	case r.ID == "":
		return Invalid("response.id", "required")
	case r.RenterID == "":
		return Invalid("response.renter_id", "required")
	case r.Model == "":
		return Invalid("response.model", "required")
	case r.PreviousID == r.ID:
		return Invalid("response.previous_id", "must not be the response itself")
	case len(r.Input) == 0 || r.Input[0] != '[' || !json.Valid(r.Input):
		return Invalid("response.input", "must be a JSON array of input items")
	case len(r.Response) == 0 || r.Response[0] != '{' || !json.Valid(r.Response):
		return Invalid("response.response", "must be a JSON object")
	case r.CreatedAt.IsZero():
		return Invalid("response.created_at", "required")
	case !r.ExpiresAt.After(r.CreatedAt):
		return Invalid("response.expires_at", "must be after created_at")
	case !r.HeldUntil.IsZero() && !r.HeldUntil.After(r.CreatedAt):
		return Invalid("response.held_until", "must be after created_at, or none")
	}
	return nil
}

// ResponseStore keeps the gateway's responses (KeptResponse).
// internal/sqlstore implements it beside idlegrid.Store. A response
// expired at now is read as gone whether or not ForgetResponses has
// deleted it yet.
type ResponseStore interface {
	// KeepResponse stores r: EINVALID naming the field when r is not
	// valid, ECONFLICT when its ID is taken.
	KeepResponse(ctx context.Context, r *KeptResponse) error
	// FindResponse returns the renter's response id, unless it expired at
	// now; ENOTFOUND when the renter has none such (another renter's
	// response is none of its own).
	FindResponse(ctx context.Context, renterID, id string, now time.Time) (*KeptResponse, error)
	// ResponseChain returns the renter's response id and the responses it
	// continued, each the PreviousID of the next, the first of the
	// conversation first: at most limit of them, the latest limit when
	// there are more, and no more once those read come to over maxChars
	// characters of Input and Response (the one that crossed it
	// included), so that a conversation too long to continue is not read
	// whole to be refused. The first returned has a PreviousID when the
	// conversation is longer than either bound, or when the response it
	// continued is gone (deleted, expired, or never kept); the caller
	// tells them apart by the length and the size. ENOTFOUND when id
	// itself is not the renter's response, or expired at now.
	ResponseChain(ctx context.Context, renterID, id string, now time.Time, limit int, maxChars int64) ([]*KeptResponse, error)
	// UpdateResponse sets the response object of the renter's response
	// id to response if it is still was, the object the caller last read
	// or wrote, as a background response's moves on (queued, in progress,
	// then done or cancelled): ECONFLICT, changing nothing, when another
	// write came first (a cancel that another server took), ENOTFOUND
	// when the renter has none such unexpired at now, EINVALID naming
	// response.response when response is no JSON object.
	UpdateResponse(ctx context.Context, renterID, id string, was, response json.RawMessage, now time.Time) error
	// HoldResponse sets the HeldUntil of the renter's response id to
	// until if its response object is still was, as a background run
	// renews its hold: ECONFLICT, changing nothing, when another write
	// changed the object (a cancel, or a server that found the hold run
	// out), ENOTFOUND when the renter has none such unexpired at now.
	HoldResponse(ctx context.Context, renterID, id string, was json.RawMessage, until, now time.Time) error
	// DeleteResponse forgets the renter's response id; ENOTFOUND when the
	// renter has none such unexpired at now. The responses that continued
	// it are kept, but can no longer be continued (ResponseChain).
	DeleteResponse(ctx context.Context, renterID, id string, now time.Time) error
	// ForgetResponses deletes at most limit responses that expired before
	// before, those that expired first first, and returns how many it
	// deleted: fewer than limit when no more are due.
	ForgetResponses(ctx context.Context, before time.Time, limit int) (int, error)
}
