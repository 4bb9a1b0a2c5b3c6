package agent

import (
	"testing"

	"github.com/idlegrid/idlegrid/internal/runtime"
)

// TestReadyToHandOver_modelsLast: a hand-over withdraws the node's models
// only once no workload is being stopped, so that a model this node alone
// serves is missed while its requests drain, not while a notice runs
// out; then it waits for the requests in flight.
func TestReadyToHandOver_modelsLast(t *testing.T) {
	ms := newModels(&Config{Models: []ModelConfig{{Name: "m", Upstream: "http://127.0.0.1:1/v1", InputPrice: "1", OutputPrice: "1", MaxConcurrency: 2}}})
	ms.healthy["m"] = true
	stopping := &lease{started: true, stopCause: stopByServer}
	a := &Agent{models: ms, leases: map[string]*lease{"lease_a": stopping}}
	if a.readyToHandOver() {
		t.Error("ready to hand over with a workload being stopped")
	}
	if len(ms.offered()) != 1 {
		t.Errorf("the models offered while a workload is being stopped: %v, want the healthy one still", ms.offered())
	}
	ms.active.Enter() // a request in flight
	stopping.exit = &runtime.Exit{}
	if a.readyToHandOver() {
		t.Error("ready to hand over with an inference request in flight")
	}
	if len(ms.offered()) != 0 {
		t.Errorf("the models offered once the stops are done: %v, want none: new requests go to other providers", ms.offered())
	}
	ms.active.Leave()
	if !a.readyToHandOver() {
		t.Error("not ready to hand over with nothing being stopped or answered")
	}
}
