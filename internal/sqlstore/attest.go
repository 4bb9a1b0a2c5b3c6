package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

var _ idlegrid.AttestationStore = (*DB)(nil)

// SaveAttestation stores a as the node's current fingerprint, with the
// changes from the fingerprint prevHash names, and logs it to the audit
// log in the same transaction (audit.AttestationEntry).
func (db *DB) SaveAttestation(ctx context.Context, a *idlegrid.Attestation, prevHash string, changes []idlegrid.HardwareChange) error {
	if a.Hash == "" || a.NodeID == "" {
		return idlegrid.Invalid("attestation", "node and hash are required")
	}
	fp, err := jsonArg(a.Fingerprint)
	if err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		n, err := lockNodeState(ctx, tx, a.NodeID, db.dialect.forNodeUpdate) // two attestations at once: one is current
		if err != nil {
			return err
		}
		var cur string
		err = tx.QueryRowContext(ctx, `SELECT hash FROM attestations WHERE node_id = $1 AND is_current`, a.NodeID).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if cur != prevHash {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "node %s attested another fingerprint meanwhile; compare again", a.NodeID)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE attestations SET is_current = FALSE WHERE node_id = $1 AND is_current`, a.NodeID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO attestations
			(node_id, hash, fingerprint, signed_at, signature, first_received, received_at, is_current, challenge_runner)
			VALUES ($1, $2, $3, $4, $5, $6, $6, TRUE, $7)
			ON CONFLICT (node_id, hash) DO UPDATE SET signed_at = excluded.signed_at, signature = excluded.signature,
				received_at = excluded.received_at, is_current = TRUE, challenge_runner = excluded.challenge_runner`,
			a.NodeID, a.Hash, fp, timeArg(a.SignedAt), a.Signature, timeArg(a.ReceivedAt), string(a.ChallengeRunner))
		if err != nil {
			return err
		}
		for _, c := range changes {
			if _, err := tx.ExecContext(ctx, `INSERT INTO hardware_changes
				(id, node_id, kind, gpu_uuid, before_value, after_value, from_hash, to_hash, at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
				c.ID, a.NodeID, string(c.Kind), c.GPUUUID, c.Before, c.After, c.FromHash, c.ToHash, timeArg(c.At)); err != nil {
				return err
			}
		}
		return appendAudit(tx)(audit.AttestationEntry(a, n.ProviderID, changes))
	})
}

const attestationColumns = `node_id, hash, fingerprint, signed_at, signature, received_at, challenge_runner`

func scanAttestation(s scanner) (*idlegrid.Attestation, error) {
	var a idlegrid.Attestation
	var fp string
	var signed, received sql.NullInt64
	if err := s.Scan(&a.NodeID, &a.Hash, &fp, &signed, &a.Signature, &received, &a.ChallengeRunner); err != nil {
		return nil, err
	}
	a.SignedAt, a.ReceivedAt = timeOf(signed), timeOf(received)
	return &a, jsonOf(fp, &a.Fingerprint)
}

// LatestAttestation returns the node's current attestation.
func (db *DB) LatestAttestation(ctx context.Context, nodeID string) (*idlegrid.Attestation, error) {
	var a *idlegrid.Attestation
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		a, err = scanAttestation(tx.QueryRowContext(ctx,
			`SELECT `+attestationColumns+` FROM attestations WHERE node_id = $1 AND is_current`, nodeID))
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "node %q has not attested its hardware", nodeID)
		}
		return err
	})
	return a, err
}

// ListAttestations returns the node's distinct fingerprints, the most
// recently presented first.
func (db *DB) ListAttestations(ctx context.Context, nodeID string, limit int) ([]*idlegrid.Attestation, error) {
	var out []*idlegrid.Attestation
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryAll(ctx, tx, scanAttestation, `SELECT `+attestationColumns+` FROM attestations WHERE node_id = $1
			ORDER BY is_current DESC, received_at DESC, hash LIMIT $2`, nodeID, limitOf(limit))
		return err
	})
	return out, err
}

// ListHardwareChanges returns the node's hardware changes, newest first.
func (db *DB) ListHardwareChanges(ctx context.Context, nodeID string, limit int) ([]*idlegrid.HardwareChange, error) {
	var out []*idlegrid.HardwareChange
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT id, node_id, kind, gpu_uuid, before_value, after_value, from_hash, to_hash, at
			FROM hardware_changes WHERE node_id = $1 ORDER BY at DESC, id DESC LIMIT $2`, nodeID, limitOf(limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c idlegrid.HardwareChange
			var at sql.NullInt64
			if err := rows.Scan(&c.ID, &c.NodeID, &c.Kind, &c.GPUUUID, &c.Before, &c.After, &c.FromHash, &c.ToHash, &at); err != nil {
				return err
			}
			c.At = timeOf(at)
			out = append(out, &c)
		}
		return rows.Err()
	})
	return out, err
}

// CreateChallenge stores an issued challenge.
func (db *DB) CreateChallenge(ctx context.Context, c *idlegrid.Challenge) error {
	if err := required("challenge.id", c.ID); err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := findNode(ctx, tx, c.NodeID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO challenges
			(id, node_id, gpu_uuid, model, vram_mb, seed, size, reason, state, min_nanos, max_nanos,
			 issued_at, deadline, answer, findings, resolved_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, '', '[]', NULL)`,
			c.ID, c.NodeID, c.GPUUUID, c.Model, c.VRAMMB, c.Seed, c.Size, string(c.Reason), string(c.State),
			c.MinNanos, c.MaxNanos, timeArg(c.IssuedAt), timeArg(c.Deadline))
		return err
	})
}

const challengeColumns = `id, node_id, gpu_uuid, model, vram_mb, seed, size, reason, state, min_nanos, max_nanos,
	issued_at, deadline, answer, findings, resolved_at`

func scanChallenge(s scanner) (*idlegrid.Challenge, error) {
	var c idlegrid.Challenge
	var answer, findings string
	var issued, deadline, resolved sql.NullInt64
	if err := s.Scan(&c.ID, &c.NodeID, &c.GPUUUID, &c.Model, &c.VRAMMB, &c.Seed, &c.Size, &c.Reason, &c.State,
		&c.MinNanos, &c.MaxNanos, &issued, &deadline, &answer, &findings, &resolved); err != nil {
		return nil, err
	}
	c.IssuedAt, c.Deadline, c.ResolvedAt = timeOf(issued), timeOf(deadline), timePtrOf(resolved)
	if answer != "" {
		c.Answer = new(idlegrid.ChallengeAnswer)
		if err := jsonOf(answer, c.Answer); err != nil {
			return nil, err
		}
	}
	if err := jsonOf(findings, &c.Findings); err != nil {
		return nil, err
	}
	if len(c.Findings) == 0 {
		c.Findings = nil
	}
	return &c, nil
}

// FindChallenge returns the challenge with id.
func (db *DB) FindChallenge(ctx context.Context, id string) (*idlegrid.Challenge, error) {
	var c *idlegrid.Challenge
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		c, err = findChallenge(ctx, tx, id)
		return err
	})
	return c, err
}

func findChallenge(ctx context.Context, tx *sql.Tx, id string) (*idlegrid.Challenge, error) {
	c, err := scanChallenge(tx.QueryRowContext(ctx, `SELECT `+challengeColumns+` FROM challenges WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("challenge", id)
	}
	return c, err
}

// ListChallenges returns the challenges f selects, newest first.
func (db *DB) ListChallenges(ctx context.Context, f idlegrid.ChallengeFilter) ([]*idlegrid.Challenge, error) {
	var a args
	scope := `1 = 1`
	if f.NodeID != "" {
		scope += ` AND node_id = ` + a.add(f.NodeID)
	}
	scopeArgs := slices.Clone(a)
	q := `SELECT ` + challengeColumns + ` FROM challenges WHERE ` + scope
	if len(f.States) > 0 {
		q += ` AND state IN ` + in(&a, f.States)
	}
	q = newestFirst(q, &a, "challenges", "issued_at", f.Before, f.Limit)
	var out []*idlegrid.Challenge
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		if err := checkCursor(ctx, tx, "challenges", scope, scopeArgs, f.Before, "challenge"); err != nil {
			return err
		}
		out, err = queryAll(ctx, tx, scanChallenge, q, a...)
		return err
	})
	return out, err
}

// ResolveChallenge stores c's outcome if it is still issued, and q with
// it unless the node is in a quarantine already (which stands), and logs
// both to the audit log in the same transaction (audit.ChallengeEntry),
// with the follow-up f when given. quarantined says whether q was stored.
func (db *DB) ResolveChallenge(ctx context.Context, c *idlegrid.Challenge, q *idlegrid.Quarantine, f *idlegrid.FollowUp) (quarantined bool, err error) {
	if c.State == idlegrid.ChallengeIssued || c.ResolvedAt == nil {
		return false, idlegrid.Invalid("challenge.state", "a resolution needs a final state and a time")
	}
	if f != nil {
		if err := checkFollowUp(f); err != nil {
			return false, err
		}
	}
	answer := ""
	if c.Answer != nil {
		kept := *c.Answer
		kept.RowHashes = nil // the digest stands for them
		s, err := jsonArg(kept)
		if err != nil {
			return false, err
		}
		answer = s
	}
	findings, err := jsonArg(append([]string{}, c.Findings...))
	if err != nil {
		return false, err
	}
	err = db.update(ctx, func(tx *sql.Tx) error {
		quarantined = false
		res, err := tx.ExecContext(ctx, `UPDATE challenges SET state = $1, answer = $2, findings = $3, resolved_at = $4
			WHERE id = $5 AND state = $6`,
			string(c.State), answer, findings, timePtrArg(c.ResolvedAt), c.ID, string(idlegrid.ChallengeIssued))
		if err := expectOne(res, err, func() error {
			if _, err := findChallenge(ctx, tx, c.ID); err != nil {
				return err
			}
			return idlegrid.Errorf(idlegrid.ECONFLICT, "challenge %s was already resolved", c.ID)
		}); err != nil {
			return err
		}
		if _, err := lockNodeState(ctx, tx, c.NodeID, db.dialect.forNodeUpdate); err != nil { // an admin's quarantine meanwhile
			return err
		}
		n, err := findNode(ctx, tx, c.NodeID)
		if err != nil {
			return err
		}
		// A node in quarantine stays in the one it is in; the failure is
		// recorded all the same.
		if q != nil && !n.Quarantined {
			if err := quarantine(ctx, tx, q, ""); err != nil { // the node is locked already
				return err
			}
			quarantined = true
		}
		if f != nil {
			if err := insertFollowUp(ctx, tx, db.dialect, f); err != nil {
				return err
			}
		}
		stored := q
		if !quarantined {
			stored = nil
		}
		return appendAudit(tx)(audit.ChallengeEntry(c, stored, n.ProviderID))
	})
	return quarantined && err == nil, err
}

// QuarantineNode puts the node in quarantine unless it is in one, and
// logs it to the audit log in the same transaction.
func (db *DB) QuarantineNode(ctx context.Context, q *idlegrid.Quarantine) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		if err := quarantine(ctx, tx, q, db.dialect.forNodeUpdate); err != nil {
			return err
		}
		return appendAudit(tx)(audit.QuarantineEntry(q, q.Since))
	})
}

// quarantine puts q's node in quarantine unless it is in one, locking
// the node first (forUpdate; "" when the caller has).
func quarantine(ctx context.Context, tx *sql.Tx, q *idlegrid.Quarantine, forUpdate string) error {
	if err := required("quarantine.id", q.ID); err != nil {
		return err
	} else if err := required("quarantine.reason", q.Reason); err != nil {
		return err
	}
	if _, err := lockNodeState(ctx, tx, q.NodeID, forUpdate); err != nil {
		return err
	}
	n, err := findNode(ctx, tx, q.NodeID)
	if err != nil {
		return err
	}
	if n.Quarantined {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "node %s is already quarantined", q.NodeID)
	}
	q.ProviderID = n.ProviderID
	evidence := string(q.Evidence)
	if evidence == "" {
		evidence = "null"
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO quarantines
		(id, node_id, provider_id, reason, evidence, since, lifted_at, lifted_by, lift_note)
		VALUES ($1, $2, $3, $4, $5, $6, NULL, '', '')`,
		q.ID, q.NodeID, q.ProviderID, q.Reason, evidence, timeArg(q.Since)); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE nodes SET quarantined = TRUE WHERE id = $1`, q.NodeID)
	return err
}

// LiftQuarantine ends the node's quarantine in force, and logs it to the
// audit log in the same transaction.
func (db *DB) LiftQuarantine(ctx context.Context, nodeID, by, note string, at time.Time) (*idlegrid.Quarantine, error) {
	var q *idlegrid.Quarantine
	err := db.update(ctx, func(tx *sql.Tx) (err error) {
		q, err = findQuarantine(ctx, tx, nodeID)
		if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "node %s is not quarantined", nodeID)
		} else if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE quarantines SET lifted_at = $1, lifted_by = $2, lift_note = $3
			WHERE id = $4 AND lifted_at IS NULL`, timeArg(at), by, note, q.ID) // not lifted by another meanwhile
		if err := expectOne(res, err, func() error { return idlegrid.Errorf(idlegrid.ECONFLICT, "node %s is not quarantined", nodeID) }); err != nil {
			return err
		}
		q.LiftedAt, q.LiftedBy, q.LiftNote = &at, by, note
		if _, err := tx.ExecContext(ctx, `UPDATE nodes SET quarantined = FALSE WHERE id = $1`, nodeID); err != nil {
			return err
		}
		return appendAudit(tx)(audit.QuarantineEntry(q, at))
	})
	return q, err
}

const quarantineColumns = `id, node_id, provider_id, reason, evidence, since, lifted_at, lifted_by, lift_note`

func scanQuarantine(s scanner) (*idlegrid.Quarantine, error) {
	var q idlegrid.Quarantine
	var evidence string
	var since, lifted sql.NullInt64
	if err := s.Scan(&q.ID, &q.NodeID, &q.ProviderID, &q.Reason, &evidence, &since, &lifted, &q.LiftedBy, &q.LiftNote); err != nil {
		return nil, err
	}
	q.Evidence, q.Since, q.LiftedAt = []byte(evidence), timeOf(since), timePtrOf(lifted)
	return &q, nil
}

// FindQuarantine returns the node's quarantine in force.
func (db *DB) FindQuarantine(ctx context.Context, nodeID string) (*idlegrid.Quarantine, error) {
	var q *idlegrid.Quarantine
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		q, err = findQuarantine(ctx, tx, nodeID)
		return err
	})
	return q, err
}

func findQuarantine(ctx context.Context, tx *sql.Tx, nodeID string) (*idlegrid.Quarantine, error) {
	q, err := scanQuarantine(tx.QueryRowContext(ctx, `SELECT `+quarantineColumns+` FROM quarantines
		WHERE node_id = $1 AND lifted_at IS NULL`, nodeID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, idlegrid.Errorf(idlegrid.ENOTFOUND, "node %q is not quarantined", nodeID)
	}
	return q, err
}

// ListQuarantines returns the quarantines f selects, newest first.
func (db *DB) ListQuarantines(ctx context.Context, f idlegrid.QuarantineFilter) ([]*idlegrid.Quarantine, error) {
	var a args
	scope := `1 = 1`
	if f.NodeID != "" {
		scope += ` AND node_id = ` + a.add(f.NodeID)
	}
	if f.ProviderID != "" {
		scope += ` AND provider_id = ` + a.add(f.ProviderID)
	}
	scopeArgs := slices.Clone(a)
	q := `SELECT ` + quarantineColumns + ` FROM quarantines WHERE ` + scope
	if f.ActiveOnly {
		q += ` AND lifted_at IS NULL`
	}
	q = newestFirst(q, &a, "quarantines", "since", f.Before, f.Limit)
	var out []*idlegrid.Quarantine
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		if err := checkCursor(ctx, tx, "quarantines", scope, scopeArgs, f.Before, "quarantine"); err != nil {
			return err
		}
		out, err = queryAll(ctx, tx, scanQuarantine, q, a...)
		return err
	})
	return out, err
}
