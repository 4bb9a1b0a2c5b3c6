package idlegrid_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/idlegrid/idlegrid"
)

func TestHeartbeatRequest_Validate(t *testing.T) {
	many := make([]idlegrid.ModelQueue, idlegrid.MaxModelsPerNode+1)
	for i := range many {
		many[i] = idlegrid.ModelQueue{Model: fmt.Sprintf("m%d", i)}
	}
	for _, tt := range []struct {
		queues []idlegrid.ModelQueue
		field  string // "" when valid
	}{
		{nil, ""},
		{[]idlegrid.ModelQueue{{Model: "llama", Queued: 0}, {Model: "qwen", Queued: 7}}, ""},
		{[]idlegrid.ModelQueue{{Model: "llama", Queued: -1}}, "model_queues[0].queued"},
		{[]idlegrid.ModelQueue{{Model: "llama"}, {Queued: 1}}, "model_queues[1].model"},
		{[]idlegrid.ModelQueue{{Model: "llama"}, {Model: "qwen"}, {Model: "llama"}}, "model_queues[2].model"},
		{many, "model_queues"},
	} {
		req := idlegrid.HeartbeatRequest{ModelQueues: tt.queues}
		err := req.Validate()
		var e *idlegrid.Error
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("Validate(%v) = %v, want nil", tt.queues, err)
		case tt.field != "" && (!errors.As(err, &e) || e.Field != tt.field || e.Code != idlegrid.EINVALID):
			t.Errorf("Validate(%d queues) = %v, want an invalid %s", len(tt.queues), err, tt.field)
		}
	}
}
