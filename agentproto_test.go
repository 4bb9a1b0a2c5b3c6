package idlegrid_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

func TestHeartbeatRequest_ValidateStarting(t *testing.T) {
	many := make([]idlegrid.LeaseStarting, idlegrid.MaxGPUsPerNode+1)
	for i := range many {
		many[i] = idlegrid.LeaseStarting{LeaseID: fmt.Sprintf("lease_%d", i)}
	}
	st := func(id string, pulled, size int64) idlegrid.LeaseStarting {
		return idlegrid.LeaseStarting{LeaseID: id, PulledBytes: pulled, ImageBytes: size}
	}
	for _, tt := range []struct {
		starting []idlegrid.LeaseStarting
		field    string // "" when valid
	}{
		{nil, ""},
		{many[:idlegrid.MaxGPUsPerNode], ""},
		{[]idlegrid.LeaseStarting{st("lease_a", 0, 0), st("lease_b", 3<<30, 8<<30), st("lease_c", 8<<30, 8<<30)}, ""},
		{[]idlegrid.LeaseStarting{st("lease_a", 0, 0), st("", 0, 0)}, "starting[1].lease_id"},
		{[]idlegrid.LeaseStarting{st(strings.Repeat("x", 101), 0, 0)}, "starting[0].lease_id"},
		{[]idlegrid.LeaseStarting{st("lease_a", 0, 0), st("lease_b", 0, 0), st("lease_a", 0, 0)}, "starting[2].lease_id"},
		{[]idlegrid.LeaseStarting{st("lease_a", 0, -1)}, "starting[0].image_bytes"},
		{[]idlegrid.LeaseStarting{st("lease_a", 0, 1<<51)}, "starting[0].image_bytes"},
		{[]idlegrid.LeaseStarting{st("lease_a", 9, 8)}, "starting[0].pulled_bytes"},
		{[]idlegrid.LeaseStarting{st("lease_a", -1, 8)}, "starting[0].pulled_bytes"},
		{many, "starting"},
	} {
		req := idlegrid.HeartbeatRequest{Starting: tt.starting}
		err := req.ValidateStarting()
		var e *idlegrid.Error
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("ValidateStarting(%d leases) = %v, want nil", len(tt.starting), err)
		case tt.field != "" && (!errors.As(err, &e) || e.Field != tt.field || e.Code != idlegrid.EINVALID):
			t.Errorf("ValidateStarting(%+v) = %v, want an invalid %s", tt.starting, err, tt.field)
		}
	}
}

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
