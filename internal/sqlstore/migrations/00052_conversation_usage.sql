-- What each renter's conversations hold, all together: their items and
-- the items' characters. Every write that adds or deletes items changes
-- its renter's row in the same transaction (conversation.go), so that the
-- gateway bounds what a renter keeps without counting its items. Its rows
-- start from the items kept before it.

-- +goose Up
CREATE TABLE conversation_usage (
	renter_id TEXT PRIMARY KEY,
	items     BIGINT NOT NULL,
	chars     BIGINT NOT NULL
);
INSERT INTO conversation_usage (renter_id, items, chars)
	SELECT c.renter_id, COUNT(*), SUM(i.chars)
	FROM conversation_items i JOIN conversations c ON c.id = i.conversation_id
	GROUP BY c.renter_id;

-- +goose Down
DROP TABLE conversation_usage;
