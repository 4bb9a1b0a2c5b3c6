-- Conversation items by their own ID, whatever their conversation: an
-- item_reference in a response's input names an item of any of the
-- renter's conversations (FindItem in conversation.go).

-- +goose Up
CREATE INDEX conversation_items_item ON conversation_items (item_id);

-- +goose Down
DROP INDEX conversation_items_item;
