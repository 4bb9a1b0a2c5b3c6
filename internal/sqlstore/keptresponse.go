package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Kept responses: the gateway's answers to the Responses API, each kept
// until its ExpiresAt (idlegrid.ResponseStore). A response expired at now
// reads as gone, whether or not the sweep (ForgetResponses) has deleted
// it yet, so that what a renter sees never depends on when it last ran.

var _ idlegrid.ResponseStore = (*DB)(nil)

// MaxResponseChain is the most responses one ResponseChain returns.
const MaxResponseChain = 10000

const keptResponseColumns = `id, renter_id, model, previous_id, input, response, created_at, expires_at, held_until`

// KeepResponse stores r: EINVALID naming the field when r is not valid,
// ECONFLICT when its ID is taken, even by a response expired but not yet
// swept. The gateway keeps each response before its renter reads the
// answer's end, so responses kept at once share a commit (writebatch.go):
// alone, each would be a transaction of one row.
func (db *DB) KeepResponse(ctx context.Context, r *idlegrid.KeptResponse) error {
	if err := r.Validate(); err != nil {
		return err
	}
	return db.writes().submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO kept_responses (`+keptResponseColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.RenterID, r.Model, r.PreviousID, string(r.Input), string(r.Response),
			timeArg(r.CreatedAt), timeArg(r.ExpiresAt), timeArg(r.HeldUntil))
		return expectOne(res, err, func() error {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "response %q already exists", r.ID)
		})
	})
}

// FindResponse returns the renter's response id, unless it expired at
// now; ENOTFOUND when the renter has none such.
func (db *DB) FindResponse(ctx context.Context, renterID, id string, now time.Time) (*idlegrid.KeptResponse, error) {
	var r *idlegrid.KeptResponse
	err := db.view(ctx, func(tx *sql.Tx) error {
		var err error
		r, err = scanKeptResponse(tx.QueryRowContext(ctx, `SELECT `+keptResponseColumns+` FROM kept_responses
			WHERE id = $1 AND renter_id = $2 AND expires_at > $3`, id, renterID, timeArg(now)))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("response", id)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// responseChain follows previous_id from the response $1, only through
// the renter's ($2) responses unexpired at $3, to at most $4 of them, and
// none past the one that brings the characters read (input and response)
// over $5: the depth bound is also what stops a chain whose previous_ids
// loop.
const responseChain = `WITH RECURSIVE chain AS (
		SELECT ` + keptResponseColumns + `, 1 AS depth,
			CAST(length(input) + length(response) AS BIGINT) AS chars
		FROM kept_responses
		WHERE id = $1 AND renter_id = $2 AND expires_at > $3
	UNION ALL
		SELECT k.id, k.renter_id, k.model, k.previous_id, k.input, k.response, k.created_at, k.expires_at, k.held_until,
			c.depth + 1, c.chars + length(k.input) + length(k.response)
		FROM chain c JOIN kept_responses k ON k.id = c.previous_id
		WHERE c.depth < $4 AND c.chars <= $5 AND k.renter_id = $2 AND k.expires_at > $3
	)
	SELECT ` + keptResponseColumns + ` FROM chain ORDER BY depth`

// ResponseChain returns the renter's response id and, before it, the
// responses it continued, the first of the conversation first: at most
// limit of them, the latest limit when there are more, and none past the
// one that brings their input and response objects over maxChars
// characters. The first returned has a PreviousID when there are more,
// or when the one it continued is gone. ENOTFOUND when id is not the
// renter's response unexpired at now.
func (db *DB) ResponseChain(ctx context.Context, renterID, id string, now time.Time, limit int, maxChars int64) ([]*idlegrid.KeptResponse, error) {
	if limit < 1 || limit > MaxResponseChain {
		return nil, idlegrid.Invalid("limit", "must be between 1 and %d, got %d", MaxResponseChain, limit)
	}
	if maxChars < 1 {
		return nil, idlegrid.Invalid("max_chars", "must be at least 1, got %d", maxChars)
	}
	var chain []*idlegrid.KeptResponse
	err := db.view(ctx, func(tx *sql.Tx) error {
		var err error
		chain, err = queryAll(ctx, tx, scanKeptResponse, responseChain, id, renterID, timeArg(now), limit, maxChars)
		return err
	})
	if err != nil {
		return nil, err
	} else if len(chain) == 0 {
		return nil, notFound("response", id)
	}
	chain = cutLoop(chain)
	slices.Reverse(chain)
	return chain, nil
}

// cutLoop returns chain, latest first, up to the first response it
// repeats: two responses that continue each other (each stored before the
// other) are a loop the query follows until its depth bound, and a
// conversation has each of its responses once. The first returned then
// has a PreviousID, as when the response it continued is gone.
func cutLoop(chain []*idlegrid.KeptResponse) []*idlegrid.KeptResponse {
	seen := make(map[string]bool, len(chain))
	for i, r := range chain {
		if seen[r.ID] {
			return chain[:i]
		}
		seen[r.ID] = true
	}
	return chain
}

// UpdateResponse sets the response object of the renter's response id
// to response if it is still was: ECONFLICT when it is not, ENOTFOUND
// when the renter has none such unexpired at now. The compare reads the
// whole stored object: a background response moves on a few times in its
// life, so it is a rare write's cost.
func (db *DB) UpdateResponse(ctx context.Context, renterID, id string, was, response json.RawMessage, now time.Time) error {
	if len(response) == 0 || response[0] != '{' || !json.Valid(response) {
		return idlegrid.Invalid("response.response", "must be a JSON object")
	}
	return db.swapResponse(ctx, "response", string(response), renterID, id, was, now)
}

// HoldResponse sets the held_until of the renter's response id to until
// if its object is still was: ECONFLICT when it is not, ENOTFOUND when the
// renter has none such unexpired at now. A background run renews its hold
// so every few seconds while it runs, and learns from the ECONFLICT of a
// cancel that another server took.
func (db *DB) HoldResponse(ctx context.Context, renterID, id string, was json.RawMessage, until, now time.Time) error {
	if until.IsZero() {
		return idlegrid.Invalid("response.held_until", "required")
	}
	return db.swapResponse(ctx, "held_until", timeArg(until), renterID, id, was, now)
}

// swapResponse sets column (response or held_until) of the renter's
// response id to v if its object is still was: ECONFLICT when it is not,
// ENOTFOUND when the renter has none such unexpired at now.
func (db *DB) swapResponse(ctx context.Context, column string, v any, renterID, id string, was json.RawMessage, now time.Time) error {
	return db.writes().submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE kept_responses SET `+column+` = $1
			WHERE id = $2 AND renter_id = $3 AND expires_at > $4 AND response = $5`,
			v, id, renterID, timeArg(now), string(was))
		return expectOne(res, err, func() error { return whyNotUpdated(ctx, tx, renterID, id, now) })
	})
}

// whyNotUpdated is why UpdateResponse or HoldResponse changed no row: the
// response is gone, or it changed since its caller read it.
func whyNotUpdated(ctx context.Context, tx *sql.Tx, renterID, id string, now time.Time) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM kept_responses WHERE id = $1 AND renter_id = $2 AND expires_at > $3`,
		id, renterID, timeArg(now)).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return notFound("response", id)
	case err != nil:
		return err
	}
	return idlegrid.Errorf(idlegrid.ECONFLICT, "response %q changed since it was read", id)
}

// DeleteResponse forgets the renter's response id; ENOTFOUND when the
// renter has none such unexpired at now. The responses that continued it
// are kept; their chains now stop after it (ResponseChain).
func (db *DB) DeleteResponse(ctx context.Context, renterID, id string, now time.Time) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM kept_responses WHERE id = $1 AND renter_id = $2 AND expires_at > $3`,
			id, renterID, timeArg(now))
		return expectOne(res, err, func() error { return notFound("response", id) })
	})
}

// ForgetResponses deletes at most limit responses that expired before
// before, those that expired first first, and returns how many it
// deleted: fewer than limit when no more are due. As the other sweeps
// (expiry.go), it finds them by a read and deletes them by a short write,
// which it takes only when some are due.
func (db *DB) ForgetResponses(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkExpiryBatch(limit); err != nil {
		return 0, err
	}
	ids, err := db.dueIDs(ctx, `SELECT id FROM kept_responses WHERE expires_at < $1
		ORDER BY expires_at, id LIMIT $2`, timeArg(before), limit)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	var deleted int64
	err = db.update(ctx, func(tx *sql.Tx) error {
		var a args
		q := `DELETE FROM kept_responses WHERE id IN ` + in(&a, ids) + ` AND expires_at < ` + a.add(timeArg(before))
		res, err := tx.ExecContext(ctx, q, a...)
		if err != nil {
			return err
		}
		deleted, err = res.RowsAffected()
		return err
	})
	return int(deleted), err
}

func scanKeptResponse(s scanner) (*idlegrid.KeptResponse, error) {
	r := &idlegrid.KeptResponse{}
	var input, response string
	var created, expires, held sql.NullInt64
	if err := s.Scan(&r.ID, &r.RenterID, &r.Model, &r.PreviousID, &input, &response, &created, &expires, &held); err != nil {
		return nil, err
	}
	r.Input, r.Response = json.RawMessage(input), json.RawMessage(response)
	r.CreatedAt, r.ExpiresAt, r.HeldUntil = timeOf(created), timeOf(expires), timeOf(held)
	return r, nil
}
