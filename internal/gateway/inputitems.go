package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// InputItemsPage is GET /v1/responses/{id}/input_items's answer, as
// OpenAI's: a page of the response's own input items (not those of the
// responses it continued, which are theirs), each with an ID.
type InputItemsPage struct {
	Object  string            `json:"object"` // "list"
	Data    []json.RawMessage `json:"data"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

// itemsQuery is what GET /v1/responses/{id}/input_items asks for.
type itemsQuery struct {
	after string
	limit int
	asc   bool
}

func parseItemsQuery(r *http.Request) (itemsQuery, error) {
	q, err := checkQuery(r, "after", "limit", "order", "include", "include[]")
	if err != nil {
		return itemsQuery{}, err
	}
	iq := itemsQuery{after: q.Get("after"), limit: 20}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		iq.asc = true
	default:
		return iq, idlegrid.Invalid("order", "must be asc or desc")
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return iq, idlegrid.Invalid("limit", "must be a whole number between 1 and 100")
		}
		iq.limit = n
	}
	return iq, nil
}

// listInputItems answers GET /v1/responses/{id}/input_items.
func (g *Gateway) listInputItems(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	iq, err := parseItemsQuery(r)
	if err != nil {
		return err
	}
	kr, err := g.findResponse(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	items, err := inputItems(kr)
	if err != nil {
		return err
	}
	page, err := iq.page(items)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// inputItems are kr's input items as OpenAI lists them: each with an ID
// (its own, when the renter gave it one; else "msg_" or "item_", the
// response's digits and the item's place), a message with its type, its
// status and its content as a list of parts.
func inputItems(kr *idlegrid.KeptResponse) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(kr.Input, &items); err != nil {
		return nil, fmt.Errorf("kept response %s: its input: %w", kr.ID, err)
	}
	digits := strings.TrimPrefix(kr.ID, "resp_")
	for i, it := range items {
		var err error
		if items[i], err = listedItem(it, digits, i); err != nil {
			return nil, fmt.Errorf("kept response %s: input item %d: %w", kr.ID, i, err)
		}
	}
	return items, nil
}

// listedItem is one input item as listed (inputItems).
func listedItem(it json.RawMessage, digits string, i int) (json.RawMessage, error) {
	role := gjson.GetBytes(it, "role")
	var err error
	if !gjson.GetBytes(it, "id").Exists() {
		prefix := "item_"
		if role.Exists() {
			prefix = "msg_"
		}
		id, _ := json.Marshal(fmt.Sprintf("%s%s%04d", prefix, digits, i))
		if it, err = openai.SetField(it, "id", id); err != nil {
			return nil, err
		}
	}
	if !role.Exists() {
		return it, nil
	}
	if !gjson.GetBytes(it, "type").Exists() {
		if it, err = openai.SetField(it, "type", []byte(`"message"`)); err != nil {
			return nil, err
		}
	}
	if !gjson.GetBytes(it, "status").Exists() {
		if it, err = openai.SetField(it, "status", []byte(`"completed"`)); err != nil {
			return nil, err
		}
	}
	if content := gjson.GetBytes(it, "content"); content.Type == gjson.String {
		part := "input_text"
		if role.Str == "assistant" {
			part = "output_text"
		}
		parts, _ := json.Marshal([]map[string]string{{"type": part, "text": content.Str}})
		return openai.SetField(it, "content", parts)
	}
	return it, nil
}

// page is the page of items (in their order, first to last) iq asks for:
// the last first unless asc, from the one after iq.after.
func (iq itemsQuery) page(items []json.RawMessage) (*InputItemsPage, error) {
	if !iq.asc {
		items = slices.Clone(items)
		slices.Reverse(items)
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = gjson.GetBytes(it, "id").Str
	}
	from := 0
	if iq.after != "" {
		i := slices.Index(ids, iq.after)
		if i < 0 {
			return nil, idlegrid.Invalid("after", "no input item %q in this response", iq.after)
		}
		from = i + 1
	}
	p := &InputItemsPage{Object: "list", Data: []json.RawMessage{}}
	if from >= len(items) {
		return p, nil
	}
	end := min(len(items), from+iq.limit)
	p.Data = items[from:end]
	p.FirstID, p.LastID = &ids[from], &ids[end-1]
	p.HasMore = end < len(items)
	return p, nil
}
