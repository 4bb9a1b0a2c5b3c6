package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid"
)

// Item references: an item of a response's input may name an item the
// gateway keeps instead of carrying it ({"type": "item_reference", "id":
// …}), as OpenAI's Responses API allows. The gateway sends the provider
// the item itself, since the provider keeps nothing: an item of the
// conversation or chain of responses the request continues, else of any
// of the renter's conversations, else an input item of a response kept
// for the renter, by the ID GET /v1/responses/{id}/input_items lists it
// under. An output item of a response that is not in the request's own
// chain is not found: the gateway keeps it by its response alone, under
// the ID its provider gave it.

// resolve returns own, a response's input items, with each
// item_reference replaced by the item it names; history is the items of
// the conversation or chain the request continues. A reference that names
// no item kept for the renter is a 400 naming it.
func (g *Gateway) resolve(ctx context.Context, renterID string, own, history []json.RawMessage) ([]json.RawMessage, error) {
	var inHistory map[string]json.RawMessage
	out := make([]json.RawMessage, len(own))
	for i, it := range own {
		if gjson.GetBytes(it, "type").Str != "item_reference" {
			out[i] = it
			continue
		}
		if inHistory == nil {
			inHistory = itemsByID(history)
		}
		id := gjson.GetBytes(it, "id").Str
		item, err := g.referred(ctx, renterID, id, inHistory)
		if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
			return nil, idlegrid.Invalid(fmt.Sprintf("input[%d].id", i), "no item %q is kept for this account: an item_reference names an item of the conversation or responses this one continues, of one of the account's conversations, or an input item of one of its kept responses; send the item itself instead", id)
		} else if err != nil {
			return nil, err
		}
		out[i] = item
	}
	return out, nil
}

// itemsByID are items by their IDs, those without one left out.
func itemsByID(items []json.RawMessage) map[string]json.RawMessage {
	byID := make(map[string]json.RawMessage, len(items))
	for _, it := range items {
		if id := gjson.GetBytes(it, "id").Str; id != "" {
			byID[id] = it
		}
	}
	return byID
}

// referred returns the item id the renter refers to: from history, the
// items the request continues, else from the renter's conversations, else
// a kept response's input item; ENOTFOUND when none is kept.
func (g *Gateway) referred(ctx context.Context, renterID, id string, history map[string]json.RawMessage) (json.RawMessage, error) {
	if it, ok := history[id]; ok {
		return it, nil
	}
	it, err := g.cfg.Store.FindItem(ctx, renterID, id)
	if err == nil {
		return it.Item, nil
	} else if idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		return nil, err
	}
	return g.keptInputItem(ctx, renterID, id)
}

// keptInputItem returns the input item id of a response kept for the
// renter, as input_items lists it: the IDs the gateway gives input items
// name their response and their place (listedItem). ENOTFOUND for any
// other ID.
func (g *Gateway) keptInputItem(ctx context.Context, renterID, id string) (json.RawMessage, error) {
	notKept := idlegrid.Errorf(idlegrid.ENOTFOUND, "item %q not found", id)
	_, rest, _ := strings.Cut(id, "_")
	const digits = 25 // a request's ID's, as the response's (responseID)
	if len(rest) < digits+4 {
		return nil, notKept
	}
	place, err := strconv.Atoi(rest[digits:])
	if err != nil {
		return nil, notKept
	}
	kr, err := g.cfg.Store.FindResponse(ctx, renterID, "resp_"+rest[:digits], g.cfg.Clock.Now())
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notKept
	} else if err != nil {
		return nil, err
	}
	items, err := inputItems(kr)
	if err != nil {
		return nil, err
	}
	if place < 0 || place >= len(items) || gjson.GetBytes(items[place], "id").Str != id {
		return nil, notKept
	}
	return items[place], nil
}
