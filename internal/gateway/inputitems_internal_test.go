package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestInputItems: a kept response's input items as GET …/input_items
// lists them: each with an ID (the renter's own, else msg_ or item_, the
// response's digits and its place), a message with its type, status and
// its content as parts (input_text, or output_text for the assistant's),
// any other item as it came.
func TestInputItems(t *testing.T) {
	kr := &idlegrid.KeptResponse{ID: "resp_123", Input: []byte(`[
		{"role": "user", "content": "Hi"},
		{"role": "assistant", "content": "Hello"},
		{"type": "function_call_output", "call_id": "c1", "output": "42"},
		{"id": "msg_mine", "type": "message", "role": "user", "status": "incomplete", "content": [{"type": "input_text", "text": "and?"}]}
	]`)}
	want := []string{
		`{"id": "msg_1230000", "type": "message", "role": "user", "status": "completed", "content": [{"type": "input_text", "text": "Hi"}]}`,
		`{"id": "msg_1230001", "type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Hello"}]}`,
		`{"id": "item_1230002", "type": "function_call_output", "call_id": "c1", "output": "42"}`,
		`{"id": "msg_mine", "type": "message", "role": "user", "status": "incomplete", "content": [{"type": "input_text", "text": "and?"}]}`,
	}
	got, err := inputItems(kr)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d items, want %d: %s", len(got), len(want), got)
	}
	for i := range want {
		var g, w any
		if err := json.Unmarshal(got[i], &g); err != nil {
			t.Fatalf("item %d: %s: %v", i, got[i], err)
		}
		json.Unmarshal([]byte(want[i]), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("item %d: %s\nwant %s", i, got[i], want[i])
		}
	}
	kr.Input = []byte(`{"role": "user"}`)
	if _, err := inputItems(kr); err == nil {
		t.Error("input that is no list of items: no error")
	}
}
