package market

import (
	"testing"

	"github.com/idlegrid/idlegrid"
)

func TestCounted(t *testing.T) {
	for _, tt := range []struct {
		counts map[string]int
		want   string
	}{
		{map[string]int{"US": 4, "CH": 1, "EU": 4}, "EU (4), US (4), CH (1)"},
		{map[string]int{"": 2, "SG": 1}, "none given (2), SG (1)"},
		{map[string]int{"a": 7, "b": 6, "c": 5, "d": 4, "e": 3, "f": 2, "g": 1}, "a (7), b (6), c (5), d (4), e (3), 2 others (3)"},
		{map[string]int{"a": 2, "b": 2, "c": 2, "d": 2, "e": 2, "f": 1}, "a (2), b (2), c (2), d (2), e (2), 1 other (1)"},
	} {
		if got := counted(tt.counts); got != tt.want {
			t.Errorf("counted(%v) = %q, want %q", tt.counts, got, tt.want)
		}
	}
}

func TestRunLength(t *testing.T) {
	for s, want := range map[int64]string{45: "45s", 90: "1m30s", 1800: "30m", 3600: "1h", 5400: "1h30m", 4*3600 + 1: "4h0m1s"} {
		if got := runLength(s); got != want {
			t.Errorf("runLength(%d) = %q, want %q", s, got, want)
		}
	}
}

func TestRuledOut_fewGPUsText(t *testing.T) {
	for _, tt := range []struct {
		gpus, nodes, most int
		models            []string
		want              string
	}{
		{16, 1, 8, nil, "1 node has fewer than its 16 GPUs on one node; the most among them is 8; if it can run across nodes, 2 nodes of 8 GPUs (nodes, gpus; --nodes 2 --gpus 8) would fit there"},
		{6, 2, 4, []string{"A100-80GB"}, "1 node has fewer than its 6 GPUs of its models and memory on one node; the most among them is 4; if it can run across nodes, 3 nodes of 4 GPUs (nodes, gpus; --nodes 3 --gpus 4) would fit there"},
		{7, 1, 4, nil, "1 node has fewer than its 7 GPUs on one node; the most among them is 4"}, // 7 splits only into ones
	} {
		o := &ruledOut{maxGPUs: tt.most}
		job := &idlegrid.Job{JobSpec: idlegrid.JobSpec{GPUs: tt.gpus, Nodes: tt.nodes, GPUModels: tt.models}}
		if got := o.fewGPUsText(1, job); got != tt.want {
			t.Errorf("fewGPUsText(%d×%d, most %d) =\n %q\nwant\n %q", tt.nodes, tt.gpus, tt.most, got, tt.want)
		}
	}
}

func TestRuledOut_belowBarText(t *testing.T) {
	o := &ruledOut{maxRel: 0.97, maxLevel: 1, gold: Config{GoldMinReliability: 0.9, GoldMinLevel: 2}}
	want := "2 nodes are below gold's bar (reliability at least 0.90 and trust level at least 2); the most reliable of them has 0.97 at level 1; silver runs on them"
	if got := o.belowBarText(2); got != want {
		t.Errorf("belowBarText = %q, want %q", got, want)
	}
}

func TestRuledOut_soldText(t *testing.T) {
	o := &ruledOut{}
	if got, want := o.soldText(1), "it sells no tier now"; got != want {
		t.Errorf("soldText, none sold = %q, want %q", got, want)
	}
	o.sold = [tierCount]int{0, 1, 3}
	if got, want := o.soldText(3), "they sell: silver (1), bronze (3)"; got != want {
		t.Errorf("soldText = %q, want %q", got, want)
	}
}
