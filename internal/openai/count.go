package openai

import (
	"encoding/json"
	"fmt"

	"github.com/idlegrid/idlegrid"
)

// BytesPerToken is the gateway's estimate of how many bytes of text make one
// token, for models whose server reports no usage: about four for English
// with the tokenizers of today's open models. It is an estimate, and it is
// used only when the model server gives no usage of its own.
const BytesPerToken = 4

// perMessageTokens is what a chat message's framing (role, separators)
// costs on top of its text.
const perMessageTokens = 4

// MediaTokens is the gateway's estimate of a chat message's image, audio
// or video part, which the model server fetches or decodes itself: about
// what a 1024×1024 image costs in OpenAI's vision models (765). Like
// BytesPerToken, it is used only when the model server gives no usage.
const MediaTokens = 765

// EstimateTokens estimates the tokens of n bytes of text, rounding up.
func EstimateTokens(n int) int64 {
	if n <= 0 {
		return 0
	}
	return int64((n + BytesPerToken - 1) / BytesPerToken)
}

// promptText gathers what a prompt says: its length in bytes of text, the
// tokens it gives as numbers, its messages, and its first MaxPrefixBytes.
type promptText struct {
	textBytes  int
	ids        int64 // prompts given as token IDs
	batch      int   // the prompts of a completions batch: each string or list of token IDs
	nMessages  int
	media      int // a chat's image, audio and video parts
	besides    int // a chat's tool calls, in JSON bytes
	references int // a response's item_reference items
	prefix     []byte
}

func (p *promptText) tokens() int64 {
	return EstimateTokens(p.textBytes) + p.ids + int64(p.nMessages*perMessageTokens) + int64(p.media)*MediaTokens
}

// add counts s as prompt text.
func (p *promptText) add(s string) {
	p.textBytes += len(s)
	p.mark(s)
}

// mark adds s to the prefix only: framing the message's tokens count.
func (p *promptText) mark(s string) {
	if room := MaxPrefixBytes - len(p.prefix); room > 0 {
		p.prefix = append(p.prefix, s[:min(room, len(s))]...)
	}
}

// messages reads a chat request's messages.
func (p *promptText) messages(raw json.RawMessage) error {
	var msgs []struct {
		Role         string          `json:"role"`
		Content      json.RawMessage `json:"content"`
		ToolCalls    json.RawMessage `json:"tool_calls"`
		FunctionCall json.RawMessage `json:"function_call"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		return idlegrid.Invalid("messages", "required: a list of {role, content}")
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return idlegrid.Invalid("messages", "must be a list of {role, content}")
	} else if len(msgs) == 0 {
		return idlegrid.Invalid("messages", "must not be empty")
	}
	for i, m := range msgs {
		if m.Role == "" {
			return idlegrid.Invalid(fmt.Sprintf("messages[%d].role", i), "required")
		}
		p.nMessages++
		p.besides += len(m.ToolCalls) + len(m.FunctionCall)
		p.mark(m.Role)
		p.mark("\x00")
		if err := p.content(fmt.Sprintf("messages[%d].content", i), m.Content); err != nil {
			return err
		}
		p.mark("\x00")
	}
	return nil
}

// content reads a message's content: a string, or a list of parts of
// which the text parts count as text and the media parts (mediaParts) as
// media.
func (p *promptText) content(field string, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil // an assistant message with tool calls only
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return idlegrid.Invalid(field, "%s", jsonProblem(err))
		}
		p.add(s)
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return idlegrid.Invalid(field, "must be a string or a list of {type, text} parts")
	}
	for _, part := range parts {
		p.add(part.Text)
		if mediaParts[part.Type] {
			p.media++
		}
	}
	return nil
}

// mediaParts are the content part types of OpenAI's API, and of the model
// servers that follow it (vLLM, SGLang), that the model server turns into
// tokens itself: images, audio, video and files, given by URL or inline.
var mediaParts = map[string]bool{
	"image_url": true, "input_image": true, "image": true, "input_file": true,
	"input_audio": true, "audio_url": true, "video_url": true, "video": true,
}

// prompt reads a completion's prompt or an embedding's input: a string, a
// list of strings, a list of token IDs, or a list of lists of them.
func (p *promptText) prompt(field string, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return idlegrid.Invalid(field, "required")
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		p.add(one)
		return nil
	}
	var many []json.RawMessage
	if err := json.Unmarshal(raw, &many); err != nil {
		return idlegrid.Invalid(field, "must be a string, a list of strings, or token IDs")
	}
	for i, item := range many {
		var s string
		var id int64
		var ids []int64
		switch {
		case json.Unmarshal(item, &s) == nil:
			p.add(s)
			p.batch++
		case json.Unmarshal(item, &id) == nil:
			p.ids++
		case json.Unmarshal(item, &ids) == nil:
			p.ids += int64(len(ids))
			p.batch++
		default:
			return idlegrid.Invalid(fmt.Sprintf("%s[%d]", field, i), "must be a string or token IDs")
		}
	}
	return nil
}
