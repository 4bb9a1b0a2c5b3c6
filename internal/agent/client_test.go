package agent_test

import (
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
)

// The public client is what the binary hands the agent.
var _ agent.Server = (*client.AgentClient)(nil)
