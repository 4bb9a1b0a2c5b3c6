-- Conversations: the gateway's conversations of OpenAI's Conversations API
-- (/v1/conversations), kept for their renters (conversation.go) until they
-- delete them, and the items of each: the messages, tool calls and
-- reasoning items that a response request naming the conversation has the
-- model see before its own input, and to which the gateway then adds that
-- input and the response's output.
--
-- An item's seq is its place in its conversation, from 1, in the order
-- items were added; the conversation's next_seq is the seq its next item
-- takes. A write that adds items locks the conversation's row to take
-- their seqs, so that servers adding to one conversation at once queue
-- there; a deleted item leaves a gap. An item's chars is its length in
-- characters, so that a history bounded in characters is cut without
-- reading the items it leaves out; item comes last, so that SQLite reads
-- the columns before it without following its overflow pages. A
-- conversation's items are deleted with it, in the same transaction.

-- +goose Up
CREATE TABLE conversations (
	id         TEXT PRIMARY KEY,
	renter_id  TEXT NOT NULL,
	metadata   TEXT NOT NULL,   -- JSON object of strings: the renter's labels, {} for none
	created_at BIGINT NOT NULL, -- unix microseconds
	next_seq   BIGINT NOT NULL  -- the seq of the next item added
);
CREATE TABLE conversation_items (
	conversation_id TEXT NOT NULL,
	seq             BIGINT NOT NULL,
	item_id         TEXT NOT NULL,
	chars           BIGINT NOT NULL, -- the item's length in characters
	response_id     TEXT NOT NULL DEFAULT '',
	created_at      BIGINT NOT NULL, -- unix microseconds
	item            TEXT NOT NULL,   -- JSON object: the item as listed
	PRIMARY KEY (conversation_id, seq),
	UNIQUE (conversation_id, item_id)
);

-- +goose Down
DROP TABLE conversation_items;
DROP TABLE conversations;
