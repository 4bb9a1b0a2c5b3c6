package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// Conversations, as OpenAI's Conversations API keeps them
// (idlegrid.Conversation): a renter makes one (POST /v1/conversations),
// adds items to it, lists, reads and deletes them, and names it in a
// response request (its conversation field): the model then sees the
// conversation's items before the request's own input, and once the
// response is answered (completed or incomplete) its input items and its
// output items are added to the conversation. Like kept responses they are
// kept by the coordinator, so the next response may go to any provider.
// Unlike them they do not expire.

// MaxItemsAdded is the most items one request adds to a conversation, as
// OpenAI's.
const MaxItemsAdded = 20

// ConversationObject is a conversation as the API answers it.
type ConversationObject struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"` // "conversation"
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

func conversationObject(c *idlegrid.Conversation) ConversationObject {
	md := c.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return ConversationObject{ID: c.ID, Object: "conversation", CreatedAt: c.CreatedAt.Unix(), Metadata: md}
}

// conversationBody is what POST /v1/conversations and POST
// /v1/conversations/{id} take, and POST …/items its items.
type conversationBody struct {
	Items    []json.RawMessage `json:"items"`
	Metadata map[string]string `json:"metadata"`
}

// readConversationBody reads a conversation request's body, refusing
// fields other than those known.
func (g *Gateway) readConversationBody(w http.ResponseWriter, r *http.Request, known ...string) (*conversationBody, map[string]json.RawMessage, error) {
	b, err := readBody(w, r, g.cfg.MaxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	fields := map[string]json.RawMessage{}
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, nil, idlegrid.Invalid("body", "must be a JSON object")
		}
	}
	for name := range fields {
		if !slices.Contains(known, name) {
			return nil, nil, idlegrid.Invalid(name, "unknown field; this request takes %s", strings.Join(known, " and "))
		}
	}
	var body conversationBody
	for name, v := range map[string]any{"items": &body.Items, "metadata": &body.Metadata} {
		if raw, ok := fields[name]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, v); err != nil {
				return nil, nil, idlegrid.Invalid(name, "has the wrong type: want %s", map[string]string{"items": "a list of items", "metadata": "an object of strings"}[name])
			}
		}
	}
	return &body, fields, idlegrid.ValidateMetadata("metadata", body.Metadata)
}

// renterOnly refuses callers other than a renter's keys: only renters
// have conversations and responses.
func renterOnly(c *apiKey, what string) error {
	if c.Role != idlegrid.RoleRenter || c.NodeID != "" {
		return idlegrid.Errorf(idlegrid.EFORBIDDEN, "only renter accounts have %s", what)
	}
	return nil
}

// newItems are raw, items a renter adds to a conversation (field names
// their list), as kept: each checked as an input item, at most
// MaxItemsAdded, with an ID (its own, else the gateway's) and in the form
// they are listed in (listedItem).
func (g *Gateway) newItems(field string, raw []json.RawMessage) ([]*idlegrid.ConversationItem, error) {
	if len(raw) > MaxItemsAdded {
		return nil, idlegrid.Invalid(field, "at most %d items at a time, got %d", MaxItemsAdded, len(raw))
	}
	digits := strings.TrimPrefix(idlegrid.NewID("item"), "item_")
	now := g.cfg.Clock.Now()
	items := make([]*idlegrid.ConversationItem, len(raw))
	for i, it := range raw {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := openai.CheckItem(f, it); err != nil {
			return nil, err
		}
		listed, err := listedItem(it, digits, i)
		if err != nil {
			return nil, idlegrid.Invalid(f, "must be an input item: an object with a type, or a message with a role and content")
		}
		items[i] = &idlegrid.ConversationItem{ID: gjson.GetBytes(listed, "id").Str, Item: listed, CreatedAt: now}
		if err := items[i].Validate(f); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// createConversation answers POST /v1/conversations.
func (g *Gateway) createConversation(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if err := renterOnly(c, "conversations"); err != nil {
		return err
	}
	body, _, err := g.readConversationBody(w, r, "items", "metadata")
	if err != nil {
		return err
	}
	items, err := g.newItems("items", body.Items)
	if err != nil {
		return err
	}
	if err := g.roomFor(r.Context(), c.AccountID, items); err != nil {
		return err
	}
	conv := &idlegrid.Conversation{ID: idlegrid.NewID("conv"), RenterID: c.AccountID, Metadata: body.Metadata, CreatedAt: g.cfg.Clock.Now()}
	if err := g.cfg.Store.CreateConversation(r.Context(), conv, items); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, conversationObject(conv))
	return nil
}

// findConversation returns the caller's conversation id: ENOTFOUND,
// naming it, for none (another renter's included).
func (g *Gateway) findConversation(ctx context.Context, c *apiKey, id string) (*idlegrid.Conversation, error) {
	if err := renterOnly(c, "conversations"); err != nil {
		return nil, err
	}
	conv, err := g.cfg.Store.FindConversation(ctx, c.AccountID, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, idlegrid.Errorf(idlegrid.ENOTFOUND, "%s", noConversation(id))
	}
	return conv, err
}

// noConversation says why the renter has no conversation id.
func noConversation(id string) string {
	return fmt.Sprintf("no conversation %q is kept for this account: it was never made (POST /v1/conversations), or was deleted", id)
}

// getConversation answers GET /v1/conversations/{id}.
func (g *Gateway) getConversation(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if _, err := checkQuery(r); err != nil {
		return err
	}
	conv, err := g.findConversation(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, conversationObject(conv))
	return nil
}

// updateConversation answers POST /v1/conversations/{id}: its metadata,
// replaced whole.
func (g *Gateway) updateConversation(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if _, err := g.findConversation(r.Context(), c, r.PathValue("id")); err != nil {
		return err
	}
	body, fields, err := g.readConversationBody(w, r, "metadata")
	if err != nil {
		return err
	} else if _, ok := fields["metadata"]; !ok {
		return idlegrid.Invalid("metadata", "required: the conversation's metadata, which replaces what it had")
	}
	conv, err := g.cfg.Store.UpdateConversation(r.Context(), c.AccountID, r.PathValue("id"), body.Metadata)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, conversationObject(conv))
	return nil
}

// deleteConversation answers DELETE /v1/conversations/{id}: it and its
// items are deleted; the responses that added to it are kept.
func (g *Gateway) deleteConversation(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if _, err := checkQuery(r); err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := g.findConversation(r.Context(), c, id); err != nil {
		return err
	}
	if err := g.cfg.Store.DeleteConversation(r.Context(), c.AccountID, id); err != nil {
		return err
	}
	writeDeleted(w, id, "conversation.deleted")
	return nil
}

// addItems answers POST /v1/conversations/{id}/items: the items added,
// as a list.
func (g *Gateway) addItems(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if _, err := checkQuery(r, "include", "include[]"); err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := g.findConversation(r.Context(), c, id); err != nil {
		return err
	}
	body, _, err := g.readConversationBody(w, r, "items")
	if err != nil {
		return err
	} else if len(body.Items) == 0 {
		return idlegrid.Invalid("items", "required: at least one item to add")
	}
	items, err := g.newItems("items", body.Items)
	if err != nil {
		return err
	}
	if err := g.convLocks.check(c.AccountID, id); err != nil {
		return err
	}
	if err := g.roomFor(r.Context(), c.AccountID, items); err != nil {
		return err
	}
	if err := g.cfg.Store.AddConversationItems(r.Context(), c.AccountID, id, items); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, itemsPage(items, false))
	return nil
}

// itemsPage is items as a page of a list (InputItemsPage's form).
func itemsPage(items []*idlegrid.ConversationItem, more bool) *InputItemsPage {
	p := &InputItemsPage{Object: "list", Data: make([]json.RawMessage, len(items)), HasMore: more}
	for i, it := range items {
		p.Data[i] = it.Item
	}
	if len(items) > 0 {
		p.FirstID, p.LastID = &items[0].ID, &items[len(items)-1].ID
	}
	return p
}

// listItems answers GET /v1/conversations/{id}/items: a page of its
// items, the last added first unless order=asc.
func (g *Gateway) listItems(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	iq, err := parseItemsQuery(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := g.findConversation(r.Context(), c, id); err != nil {
		return err
	}
	f := idlegrid.ConversationItemFilter{After: iq.after, Limit: iq.limit + 1, Desc: !iq.asc}
	items, err := g.cfg.Store.ConversationItems(r.Context(), c.AccountID, id, f)
	if err != nil {
		return err
	}
	more := len(items) > iq.limit
	writeJSON(w, http.StatusOK, itemsPage(items[:min(len(items), iq.limit)], more))
	return nil
}

// getItem answers GET /v1/conversations/{id}/items/{item_id}.
func (g *Gateway) getItem(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if _, err := checkQuery(r, "include", "include[]"); err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := g.findConversation(r.Context(), c, id); err != nil {
		return err
	}
	it, err := g.cfg.Store.FindConversationItem(r.Context(), c.AccountID, id, r.PathValue("item_id"))
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, it.Item)
	return nil
}

// deleteItem answers DELETE /v1/conversations/{id}/items/{item_id}: the
// conversation, as OpenAI answers it.
func (g *Gateway) deleteItem(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if _, err := checkQuery(r); err != nil {
		return err
	}
	id := r.PathValue("id")
	conv, err := g.findConversation(r.Context(), c, id)
	if err != nil {
		return err
	}
	if err := g.convLocks.check(c.AccountID, id); err != nil {
		return err
	}
	if err := g.cfg.Store.DeleteConversationItem(r.Context(), c.AccountID, id, r.PathValue("item_id")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, conversationObject(conv))
	return nil
}

// conversationsPath answers a path under /v1/conversations/ that no route
// above serves: 405 where the path is one of them, 404 otherwise.
func (g *Gateway) conversationsPath(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/conversations/")
	parts := strings.Split(rest, "/")
	var allowed []string
	switch {
	case parts[0] == "":
	case len(parts) == 1:
		allowed = []string{http.MethodGet, http.MethodPost, http.MethodDelete}
	case parts[1] != "items" || len(parts) > 3:
	case len(parts) == 2 || parts[2] == "":
		allowed = []string{http.MethodGet, http.MethodPost}
	default:
		allowed = []string{http.MethodGet, http.MethodDelete}
	}
	NoRoute(w, r, allowed)
}

// conversationHistory returns the items of the renter's conversation id
// for a response that continues it, the first first. One too long to send
// whole is refused unless truncate, which leaves its oldest items out.
func (g *Gateway) conversationHistory(ctx context.Context, renterID, id string, truncate bool) ([]json.RawMessage, error) {
	bound := g.conversationChars()
	items, whole, err := g.cfg.Store.ConversationHistory(ctx, renterID, id, MaxConversation, bound)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, idlegrid.Invalid("conversation", "%s", noConversation(id))
	} else if err != nil {
		return nil, err
	}
	if !whole && !truncate {
		return nil, idlegrid.Errorf(idlegrid.ETOOLARGE, "conversation: conversation %s is over %d items or %d characters long, more than a request may carry; start a new one, adding what matters of this one, or send truncation auto to leave its oldest items out", id, MaxConversation, bound)
	}
	history := make([]json.RawMessage, len(items))
	for i, it := range items {
		history[i] = it.Item
	}
	return history, nil
}

// itemIDs are the IDs of items.
func itemIDs(items []json.RawMessage) map[string]bool {
	ids := make(map[string]bool, len(items))
	for _, it := range items {
		ids[gjson.GetBytes(it, "id").Str] = true
	}
	return ids
}

// clashingItem refuses own, a response's input items (a JSON list), when
// one names an ID that ids, its conversation's items', has: the
// response's items are to be added to the conversation, where IDs are
// unique.
func clashingItem(ids map[string]bool, own json.RawMessage) error {
	for i, it := range gjson.ParseBytes(own).Array() {
		if id := it.Get("id"); id.Exists() && ids[id.Str] {
			return idlegrid.Invalid(fmt.Sprintf("input[%d].id", i), "item %q is in the conversation already; send it without its id, or leave it out: the model sees the conversation's items", id.Str)
		}
	}
	return nil
}

// addToConversation adds a response's input items and output items to the
// conversation its request continued, once it is answered: obj is the
// response object as the renter got it. A response that failed or was
// cancelled adds nothing, as does one whose conversation was deleted
// meanwhile. An item whose ID the conversation has already (a model
// server's that repeats its IDs) is given the gateway's; should another
// response have added one of the same ID meanwhile, each is. A failure to
// add is logged and counted: the answer is the renter's all the same.
func (x *exchange) addToConversation(obj []byte) {
	k, g := x.kept, x.g
	if status := gjson.GetBytes(obj, "status").Str; status != "completed" && status != "incomplete" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	items, err := responseItems(k, obj, g.cfg.Clock.Now(), false)
	if err == nil {
		err = g.cfg.Store.AddConversationItems(ctx, x.caller.AccountID, k.conversation, items)
	}
	if idlegrid.ErrorCode(err) == idlegrid.ECONFLICT {
		if items, err = responseItems(k, obj, g.cfg.Clock.Now(), true); err == nil {
			err = g.cfg.Store.AddConversationItems(ctx, x.caller.AccountID, k.conversation, items)
		}
	}
	switch {
	case idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND:
		g.log.Info("gateway: a response's conversation was deleted before it was answered; its items are not added", "request", x.id, "response", k.id, "conversation", k.conversation)
	case err != nil:
		g.log.Error("gateway: could not add a response's items to its conversation", "request", x.id, "response", k.id, "conversation", k.conversation, "err", err)
		g.metrics.notKept.Inc()
	}
}

// responseItems are the conversation items a response adds: its input
// items, listed as GET /v1/responses/{id}/input_items lists them, then its
// output items. Each keeps its own ID unless it has none, the
// conversation had it when the response began (k.taken), an item before
// it has it, or ours asks for the gateway's IDs throughout.
func responseItems(k *keeping, obj []byte, now time.Time, ours bool) ([]*idlegrid.ConversationItem, error) {
	var in []json.RawMessage
	if err := json.Unmarshal(k.input, &in); err != nil {
		return nil, fmt.Errorf("response %s: its input: %w", k.id, err)
	}
	out, err := openai.OutputItems(obj)
	if err != nil {
		return nil, err
	}
	digits := strings.TrimPrefix(k.id, "resp_")
	seen := map[string]bool{}
	items := make([]*idlegrid.ConversationItem, 0, len(in)+len(out))
	for i, it := range append(in, out...) {
		if id := gjson.GetBytes(it, "id"); ours || k.taken[id.Str] || seen[id.Str] {
			if it, err = openai.DeleteField(it, "id"); err != nil {
				return nil, err
			}
		}
		if it, err = listedItem(it, digits, i); err != nil {
			return nil, err
		}
		id := gjson.GetBytes(it, "id").Str
		seen[id] = true
		items = append(items, &idlegrid.ConversationItem{ID: id, Item: it, ResponseID: k.id, CreatedAt: now})
	}
	return items, nil
}
