package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

// SaveReputation stores each update's standing, new facts and level
// change, all in one transaction; see idlegrid.ReputationStore.
func (db *DB) SaveReputation(ctx context.Context, us ...*idlegrid.ReputationUpdate) error {
	if len(us) == 0 {
		return idlegrid.Invalid("reputation", "at least one update is required")
	}
	for _, u := range us {
		if err := validateReputationUpdate(u); err != nil {
			return err
		}
	}
	err := db.update(ctx, func(tx *sql.Tx) error {
		for _, u := range us {
			if err := saveReputation(ctx, tx, db.dialect, u); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, u := range us {
			u.Reputation.Version++
		}
	}
	return err
}

// saveReputation stores u in tx; see SaveReputation.
func saveReputation(ctx context.Context, tx *sql.Tx, d *dialect, u *idlegrid.ReputationUpdate) error {
	if u.Completes != "" {
		res, err := tx.ExecContext(ctx, `DELETE FROM follow_ups WHERE id = $1`, u.Completes)
		if err := expectOne(res, err, func() error {
			return &idlegrid.Error{Code: idlegrid.ENOTFOUND, Field: "reputation.completes", Message: "follow-up " + u.Completes + " is done already"}
		}); err != nil {
			return err
		}
	}
	r := u.Reputation
	if _, err := findAccount(ctx, tx, r.ProviderID); err != nil {
		return err
	}
	if r.Subject == idlegrid.SubjectNode {
		res, err := tx.ExecContext(ctx, `UPDATE nodes SET reliability = $1, level = $2 WHERE id = $3 AND provider_id = $4`,
			r.Score, r.Level, r.SubjectID, r.ProviderID)
		if err := expectOne(res, err, func() error { return notFound("node", r.SubjectID) }); err != nil {
			return err
		}
	}
	if err := putReputation(ctx, tx, d, r); err != nil {
		return err
	}
	if err := putCounts(ctx, tx, r); err != nil {
		return err
	}
	for i := range u.Facts {
		if err := insertFact(ctx, tx, d, &u.Facts[i]); err != nil {
			return err
		}
	}
	if c := u.Change; c != nil {
		return insertLevelChange(ctx, tx, c, r.ProviderID)
	}
	return nil
}

func validateReputationUpdate(u *idlegrid.ReputationUpdate) error {
	r := u.Reputation
	switch {
	case r == nil:
		return idlegrid.Invalid("reputation", "required")
	case !r.Subject.Valid():
		return idlegrid.Invalid("reputation.subject", "must be node or provider, got %q", r.Subject)
	case r.SubjectID == "" || r.ProviderID == "":
		return idlegrid.Invalid("reputation.subject_id", "subject_id and provider_id are required")
	case r.Subject == idlegrid.SubjectProvider && r.ProviderID != r.SubjectID:
		return idlegrid.Invalid("reputation.provider_id", "a provider's reputation is its own")
	case !(r.Score > 0 && r.Score <= 1):
		return idlegrid.Invalid("reputation.score", "must be above 0 and at most 1, got %v", r.Score)
	case r.Level < 0:
		return idlegrid.Invalid("reputation.level", "must not be negative")
	case r.Version < 0:
		return idlegrid.Invalid("reputation.version", "must not be negative")
	case r.UpdatedAt.IsZero() || r.CountsAt.IsZero():
		return idlegrid.Invalid("reputation.updated_at", "updated_at and counts_at are required")
	}
	for d, t := range r.Counts {
		if d == "" || !finite(t.Good) || !finite(t.Bad) || t.Good < 0 || t.Bad < 0 {
			return idlegrid.Invalid("reputation.counts", "dimension %q: counts must be finite and not negative", d)
		}
	}
	for _, f := range u.Facts {
		switch {
		case f.Key == "" || f.Kind == "":
			return idlegrid.Invalid("fact", "key and kind are required")
		case r.Subject != idlegrid.SubjectNode || f.NodeID != r.SubjectID:
			return idlegrid.Invalid("fact.node_id", "facts are saved with the reputation of their node")
		case f.At.IsZero():
			return idlegrid.Invalid("fact.at", "required")
		case f.Count < 1:
			return idlegrid.Invalid("fact.count", "must be at least 1")
		}
	}
	if c := u.Change; c != nil {
		switch {
		case c.ID == "" || c.Subject != r.Subject || c.SubjectID != r.SubjectID:
			return idlegrid.Invalid("level_change", "needs an id and the reputation's subject")
		case c.From == c.To || c.To != r.Level:
			return idlegrid.Invalid("level_change.to", "must differ from from and be the saved level")
		case c.At.IsZero():
			return idlegrid.Invalid("level_change.at", "required")
		}
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// putReputation inserts a first standing or replaces the one it was
// computed from: a version that moved on is ECONFLICT.
func putReputation(ctx context.Context, tx *sql.Tx, d *dialect, r *idlegrid.Reputation) error {
	if r.Version == 0 {
		_, err := tx.ExecContext(ctx, `INSERT INTO reputations (subject, subject_id, provider_id, score, level,
			level_name, gpu_seconds_served, uptime_through, hardware_note, version, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, $10)`,
			string(r.Subject), r.SubjectID, r.ProviderID, r.Score, r.Level, r.LevelName, r.GPUSecondsServed,
			timeArg(r.UptimeThrough), r.HardwareNote, timeArg(r.UpdatedAt))
		if isCode(d.translate(err), idlegrid.ECONFLICT) {
			return staleReputation(r)
		}
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE reputations SET score = $1, level = $2, level_name = $3,
		gpu_seconds_served = $4, uptime_through = $5, hardware_note = $6, version = version + 1, updated_at = $7
		WHERE subject = $8 AND subject_id = $9 AND version = $10`,
		r.Score, r.Level, r.LevelName, r.GPUSecondsServed, timeArg(r.UptimeThrough), r.HardwareNote, timeArg(r.UpdatedAt),
		string(r.Subject), r.SubjectID, r.Version)
	return expectOne(res, err, func() error { return staleReputation(r) })
}

func staleReputation(r *idlegrid.Reputation) error {
	return idlegrid.Errorf(idlegrid.ECONFLICT, "the reputation of %s %s changed since version %d; read it again",
		r.Subject, r.SubjectID, r.Version)
}

// putCounts replaces the subject's counts with r's.
func putCounts(ctx context.Context, tx *sql.Tx, r *idlegrid.Reputation) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM reputation_counts WHERE subject = $1 AND subject_id = $2`,
		string(r.Subject), r.SubjectID); err != nil {
		return err
	}
	for _, dim := range slices.Sorted(maps.Keys(r.Counts)) {
		t := r.Counts[dim]
		if _, err := tx.ExecContext(ctx, `INSERT INTO reputation_counts (subject, subject_id, dimension, good, bad, decayed_to)
			VALUES ($1, $2, $3, $4, $5, $6)`, string(r.Subject), r.SubjectID, dim, t.Good, t.Bad, timeArg(r.CountsAt)); err != nil {
			return err
		}
	}
	return nil
}

func insertFact(ctx context.Context, tx *sql.Tx, d *dialect, f *idlegrid.ReputationFact) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO reputation_facts (fact_key, node_id, kind, at, count,
		promised_seconds, online_seconds, source) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		f.Key, f.NodeID, f.Kind, timeArg(f.At), f.Count, f.PromisedSeconds, f.OnlineSeconds, f.Source)
	if isCode(d.translate(err), idlegrid.ECONFLICT) {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "fact %q was recorded before", f.Key)
	}
	return err
}

// insertLevelChange records a promotion or demotion and its audit-log
// entry, whose subjects are the node or provider and its provider.
func insertLevelChange(ctx context.Context, tx *sql.Tx, c *idlegrid.LevelChange, providerID string) error {
	reasons, err := jsonArg(c.Reasons)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO level_changes (id, subject, subject_id, from_level, to_level,
		from_name, to_name, reasons, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		c.ID, string(c.Subject), c.SubjectID, c.From, c.To, c.FromName, c.ToName, reasons, timeArg(c.At))
	if err != nil {
		return err
	}
	return appendAudit(tx)(audit.NewEntry(audit.KindLevelChange, []string{c.SubjectID, providerID}, c, c.At))
}

const reputationColumns = `r.subject, r.subject_id, r.provider_id, r.score, r.level, r.level_name,
	r.gpu_seconds_served, r.uptime_through, r.hardware_note, r.version, r.updated_at`

func scanReputation(s scanner) (*idlegrid.Reputation, error) {
	var r idlegrid.Reputation
	var uptime, updated sql.NullInt64
	if err := s.Scan(&r.Subject, &r.SubjectID, &r.ProviderID, &r.Score, &r.Level, &r.LevelName,
		&r.GPUSecondsServed, &uptime, &r.HardwareNote, &r.Version, &updated); err != nil {
		return nil, err
	}
	r.UptimeThrough, r.UpdatedAt = timeOf(uptime), timeOf(updated)
	r.Counts = map[string]idlegrid.ReputationTally{}
	return &r, nil
}

// loadCounts fills the counts of rs, the reputations that filter (a
// condition on r, with its args) selects.
func loadCounts(ctx context.Context, tx *sql.Tx, rs []*idlegrid.Reputation, filter string, a args) error {
	if len(rs) == 0 {
		return nil
	}
	type key struct{ subject, id string }
	by := make(map[key]*idlegrid.Reputation, len(rs))
	for _, r := range rs {
		by[key{string(r.Subject), r.SubjectID}] = r
	}
	rows, err := tx.QueryContext(ctx, `SELECT c.subject, c.subject_id, c.dimension, c.good, c.bad, c.decayed_to
		FROM reputation_counts c JOIN reputations r ON r.subject = c.subject AND r.subject_id = c.subject_id
		WHERE `+filter, a...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k key
		var dim string
		var t idlegrid.ReputationTally
		var at sql.NullInt64
		if err := rows.Scan(&k.subject, &k.id, &dim, &t.Good, &t.Bad, &at); err != nil {
			return err
		}
		if r := by[k]; r != nil {
			r.Counts[dim], r.CountsAt = t, timeOf(at)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.CountsAt.IsZero() {
			r.CountsAt = r.UpdatedAt // a standing saved with no counts
		}
	}
	return nil
}

// FindReputation returns a subject's standing.
func (db *DB) FindReputation(ctx context.Context, s idlegrid.ReputationSubject, id string) (*idlegrid.Reputation, error) {
	var r *idlegrid.Reputation
	const filter = `r.subject = $1 AND r.subject_id = $2`
	a := args{string(s), id}
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		r, err = scanReputation(tx.QueryRowContext(ctx, `SELECT `+reputationColumns+` FROM reputations r WHERE `+filter, a...))
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "%s %q has no reputation yet", s, id)
		} else if err != nil {
			return err
		}
		return loadCounts(ctx, tx, []*idlegrid.Reputation{r}, filter, a)
	})
	return r, err
}

// ListReputations returns the standings f selects, by subject and ID.
func (db *DB) ListReputations(ctx context.Context, f idlegrid.ReputationFilter) ([]*idlegrid.Reputation, error) {
	var a args
	filter := `1 = 1`
	if f.Subject != "" {
		filter += ` AND r.subject = ` + a.add(string(f.Subject))
	}
	if f.ProviderID != "" {
		filter += ` AND r.provider_id = ` + a.add(f.ProviderID)
	}
	if f.HardwareDoubted {
		filter += ` AND r.hardware_note <> ''`
	}
	if f.Limit < 0 {
		return nil, idlegrid.Invalid("limit", "must not be negative")
	}
	q := `SELECT ` + reputationColumns + ` FROM reputations r WHERE ` + filter + ` ORDER BY r.subject, r.subject_id`
	filterArgs := a
	if f.Limit > 0 {
		q += ` LIMIT ` + a.add(f.Limit)
	}
	var out []*idlegrid.Reputation
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = nil // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, q, a...)
		if err != nil {
			return err
		}
		for rows.Next() {
			r, err := scanReputation(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, r)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		countsOf, countsArgs := filter, filterArgs
		if f.Limit > 0 && len(out) > 0 { // the counts of the rows returned, not of all that match
			countsArgs = append(args(nil), filterArgs...)
			ids := make([]string, len(out))
			for i, r := range out {
				ids[i] = countsArgs.add(r.SubjectID)
			}
			countsOf += ` AND r.subject_id IN (` + strings.Join(ids, ", ") + `)`
		}
		return loadCounts(ctx, tx, out, countsOf, countsArgs)
	})
	return out, err
}

// ListReputationFacts returns up to limit of a node's facts, newest first.
func (db *DB) ListReputationFacts(ctx context.Context, nodeID string, limit int) ([]*idlegrid.ReputationFact, error) {
	var out []*idlegrid.ReputationFact
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT fact_key, node_id, kind, at, count, promised_seconds, online_seconds, source
			FROM reputation_facts WHERE node_id = $1 ORDER BY at DESC, fact_key DESC LIMIT $2`, nodeID, limitOf(limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f idlegrid.ReputationFact
			var at sql.NullInt64
			if err := rows.Scan(&f.Key, &f.NodeID, &f.Kind, &at, &f.Count, &f.PromisedSeconds, &f.OnlineSeconds, &f.Source); err != nil {
				return err
			}
			f.At = timeOf(at)
			out = append(out, &f)
		}
		return rows.Err()
	})
	return out, err
}

// ListLevelChanges returns up to limit of a subject's level changes, newest first.
func (db *DB) ListLevelChanges(ctx context.Context, s idlegrid.ReputationSubject, id string, limit int) ([]*idlegrid.LevelChange, error) {
	var out []*idlegrid.LevelChange
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT id, subject, subject_id, from_level, to_level, from_name, to_name, reasons, at
			FROM level_changes WHERE subject = $1 AND subject_id = $2 ORDER BY at DESC, id DESC LIMIT $3`,
			string(s), id, limitOf(limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c idlegrid.LevelChange
			var reasons string
			var at sql.NullInt64
			if err := rows.Scan(&c.ID, &c.Subject, &c.SubjectID, &c.From, &c.To, &c.FromName, &c.ToName, &reasons, &at); err != nil {
				return err
			}
			if err := jsonOf(reasons, &c.Reasons); err != nil {
				return err
			}
			c.At = timeOf(at)
			out = append(out, &c)
		}
		return rows.Err()
	})
	return out, err
}
