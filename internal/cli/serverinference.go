package cli

import (
	"math"
	"time"

	"github.com/idlegrid/idlegrid/internal/gateway"
)

// inferenceLimits are the inference gateway's limits an operator sets on
// idlegrid server; a zero value keeps the gateway's defaults.
type inferenceLimits struct {
	queueTimeout   time.Duration
	maxQueue       int
	keyRPS         float64
	keyBurst       int
	keyConcurrency int
	retention      time.Duration
	convItems      int64 // what a renter's conversations may hold; 0: no bound
	convChars      int64
}

// inferenceFlags adds the gateway's flags to fs.
func inferenceFlags(fs *flagSet) *inferenceLimits {
	l := &inferenceLimits{}
	fs.DurationVar(&l.queueTimeout, "inference-queue-timeout", gateway.DefaultQueueTimeout,
		"how long an inference request may wait for a provider with room when every provider of its model is busy; 0: refuse it at once (429)")
	fs.IntVar(&l.maxQueue, "inference-max-queue", gateway.DefaultMaxQueue, "at most this many inference requests wait per model; more are refused (429)")
	fs.Float64Var(&l.keyRPS, "inference-key-rps", 0, "inference requests a second each API key may send (a token bucket); 0: no limit")
	fs.IntVar(&l.keyBurst, "inference-key-burst", 0, "how many requests above --inference-key-rps a key may send at once (default: a second's worth, at least 1)")
	fs.IntVar(&l.keyConcurrency, "inference-key-concurrency", 0, "inference requests each API key may have in flight; 0: no limit")
	fs.DurationVar(&l.retention, "response-retention", gateway.DefaultResponseRetention,
		"how long a response of POST /v1/responses is kept to be continued (previous_response_id) and read back, unless its request says store false")
	fs.Int64Var(&l.convItems, "inference-conversation-items", gateway.DefaultConversationItems,
		"the most items a renter's conversations (POST /v1/conversations) may hold, all together; past it, adding is refused until the renter deletes some; 0: no bound")
	fs.Int64Var(&l.convChars, "inference-conversation-chars", gateway.DefaultConversationChars,
		"the most characters the items of a renter's conversations may come to, all together; 0: no bound")
	return l
}

// check validates the flags, each error naming its flag.
func (l *inferenceLimits) check() error {
	switch {
	case l.queueTimeout < 0 || l.queueTimeout > 5*time.Minute:
		return usagef("--inference-queue-timeout must be between 0 and 5m, got %s", l.queueTimeout)
	case l.maxQueue < 1 || l.maxQueue > 1_000_000:
		return usagef("--inference-max-queue must be between 1 and 1000000, got %d", l.maxQueue)
	case l.keyRPS < 0 || l.keyRPS > 1e6 || math.IsNaN(l.keyRPS):
		return usagef("--inference-key-rps must be between 0 and 1000000, got %g", l.keyRPS)
	case l.keyBurst < 0 || l.keyBurst > 1_000_000:
		return usagef("--inference-key-burst must be between 0 and 1000000, got %d", l.keyBurst)
	case l.keyConcurrency < 0 || l.keyConcurrency > 1_000_000:
		return usagef("--inference-key-concurrency must be between 0 and 1000000, got %d", l.keyConcurrency)
	case l.retention < time.Minute || l.retention > 10*365*24*time.Hour:
		return usagef("--response-retention must be between 1m and 87600h (ten years), got %s", l.retention)
	case l.convItems < 0 || l.convItems > 1e12:
		return usagef("--inference-conversation-items must be between 0 and 1000000000000, got %d", l.convItems)
	case l.convChars < 0 || l.convChars > 1e15:
		return usagef("--inference-conversation-chars must be between 0 and 1000000000000000, got %d", l.convChars)
	}
	return nil
}

// apply sets the limits on the gateway's config; nil keeps its defaults.
func (l *inferenceLimits) apply(c *gateway.Config) {
	if l == nil {
		return
	}
	c.QueueTimeout, c.MaxQueue = l.queueTimeout, l.maxQueue
	if l.queueTimeout == 0 {
		c.QueueTimeout = -1 // the gateway reads 0 as its default
	}
	c.KeyRequestsPerSecond, c.KeyBurst, c.KeyConcurrency = l.keyRPS, l.keyBurst, l.keyConcurrency
	c.ResponseRetention = l.retention
	c.ConversationItems, c.ConversationChars = noBoundAtZero(l.convItems), noBoundAtZero(l.convChars)
	if l.keyRPS > 0 && l.keyBurst == 0 {
		c.KeyBurst = max(1, int(math.Ceil(l.keyRPS)))
	}
}

// noBoundAtZero is a flag's bound as the gateway reads it: the flag's 0
// (no bound) is the gateway's negative, since the gateway reads 0 as its
// default.
func noBoundAtZero(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}
