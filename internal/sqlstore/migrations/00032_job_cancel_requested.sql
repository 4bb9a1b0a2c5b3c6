-- When the renter cancelled a running job (idlegrid.Job.CancelRequestedAt),
-- unix microseconds; NULL when it was not cancelled. The job ends
-- cancelled once its leases have ended, however they end: it is never
-- requeued (idlegrid.NextJobState).
--
-- A running job whose renter cancelled it before this column existed is
-- known by its live leases' stop, "cancelled by the renter": it keeps the
-- cancel, from when that stop was asked.

-- +goose Up
ALTER TABLE jobs ADD COLUMN cancel_requested_at BIGINT;
UPDATE jobs SET cancel_requested_at = (SELECT MIN(l.notice_at) FROM leases l
		WHERE l.job_id = jobs.id AND l.state IN ('assigned', 'running') AND l.stop_requested = 'cancelled by the renter')
	WHERE state = 'running' AND EXISTS (SELECT 1 FROM leases l
		WHERE l.job_id = jobs.id AND l.state IN ('assigned', 'running') AND l.stop_requested = 'cancelled by the renter'
			AND l.notice_at IS NOT NULL);

-- +goose Down
ALTER TABLE jobs DROP COLUMN cancel_requested_at;
