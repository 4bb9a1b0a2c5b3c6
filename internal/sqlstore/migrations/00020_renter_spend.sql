-- What each renter was charged, all time: its leases' charges and its
-- metered inference requests'. Balance.Spent read it as a sum over every
-- lease the renter ever had, and left inference out; the gateway reads a
-- renter's balance at each refresh of its budget, so that sum grew with
-- the renter's history. The store adds to it in the transaction that
-- charges (a lease moving on with a charge, an inference request recorded).

-- +goose Up
CREATE TABLE renter_spend (
	renter_id      TEXT PRIMARY KEY,
	charged_micros BIGINT NOT NULL
);
INSERT INTO renter_spend (renter_id, charged_micros)
	SELECT renter_id, CAST(SUM(charged) AS BIGINT) FROM (
		SELECT renter_id, charged_micros AS charged FROM leases WHERE charged_micros <> 0
		UNION ALL
		SELECT renter_id, charge_micros AS charged FROM inference_usage WHERE charge_micros <> 0
	) AS charges GROUP BY renter_id;

-- +goose Down
DROP TABLE renter_spend;
