package wire

import "github.com/idlegrid/idlegrid"

// JoinTokenCheck is the body of POST /v1/agent/join-tokens/check: the
// secret of a join token, to check without using it.
type JoinTokenCheck struct {
	Token string `json:"token"`
}

// JoinTokenChecked answers it: the token, when a node could join with it
// now.
type JoinTokenChecked struct {
	JoinToken *idlegrid.JoinToken `json:"join_token"`
}
