package cli

import (
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
)

// devProvider is one simulated provider of "idlegrid dev" and its nodes.
type devProvider struct {
	name  string
	nodes []devNode
}

// devNode is one simulated machine: what its owner would write in the
// agent's config.
type devNode struct {
	name      string
	gpus      string // fake GPU spec, e.g. "4xH100-80GB"
	region    string
	residency string
	cpuCores  int
	ramMB     int
	diskGB    int
	schedule  agent.ScheduleConfig
	floor     map[idlegrid.Tier]string // per GPU-hour; a tier left out is not sold
	kinds     []idlegrid.WorkloadKind  // empty: all
	serves    *devModel                // a model it serves for inference, or nil
}

// devModel is a model a dev node serves through the gateway, from a
// simulated model server (infersim.ModelServer) timed by the node's GPU.
type devModel struct {
	gpu                     string // a key of infersim.GPUs
	inputPrice, outputPrice string // per million tokens
	concurrency             int
}

// devModelName is the model the demo fleet serves: an 8B instruct model,
// simulated.
const devModelName = "sim-8b-instruct"

var alwaysOn = agent.ScheduleConfig{Mode: idlegrid.ScheduleAlways}

// devFleet is the demo market's supply: four providers, eight nodes, a mix
// of data-centre and consumer GPUs in five regions. Floors follow what
// public GPU marketplaces charge; gold (guaranteed) costs most, bronze
// (interruptible) least. Six nodes are always on, so jobs flow whatever
// the hour; two are offered only in their owners' off hours.
var devFleet = []devProvider{
	{name: "northbeam-dc", nodes: []devNode{
		{name: "nb-h100-01", gpus: "4xH100-80GB", region: "us-east", residency: "US", cpuCores: 96, ramMB: 1 << 20, diskGB: 8000,
			schedule: alwaysOn, floor: tiers("2.49", "2.19", "1.59"), serves: &devModel{gpu: "H100-80GB", inputPrice: "0.20", outputPrice: "0.60", concurrency: 64}},
		{name: "nb-a100-01", gpus: "4xA100-80GB", region: "us-east", residency: "US", cpuCores: 64, ramMB: 512 << 10, diskGB: 4000,
			schedule: alwaysOn, floor: tiers("1.79", "1.49", "0.99")},
	}},
	{name: "fjord-compute", nodes: []devNode{
		{name: "fj-l40s-01", gpus: "4xL40S", region: "eu-west", residency: "EU", cpuCores: 64, ramMB: 256 << 10, diskGB: 4000,
			schedule: alwaysOn, floor: tiers("1.09", "0.89", "0.59")},
		{name: "fj-a100-02", gpus: "2xA100-80GB", region: "eu-central", residency: "EU", cpuCores: 32, ramMB: 256 << 10, diskGB: 2000,
			// A university lab's cluster: free on weeknights and all weekend.
			schedule: agent.ScheduleConfig{Mode: idlegrid.ScheduleWindows, TimeZone: "Europe/Berlin", Weekly: []idlegrid.WeeklyWindow{
				{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "19:00", End: "07:00"},
				{Days: []string{"sat", "sun"}, Start: "00:00", End: "00:00"},
			}},
			floor: tiers("1.69", "1.39", "0.89"), kinds: []idlegrid.WorkloadKind{idlegrid.KindTraining, idlegrid.KindFineTune, idlegrid.KindEval}},
	}},
	{name: "garage-gamers", nodes: []devNode{
		{name: "gg-4090-01", gpus: "2xRTX4090", region: "us-west", residency: "US", cpuCores: 24, ramMB: 128 << 10, diskGB: 2000,
			// A gaming PC, offered while its owner sleeps.
			schedule: agent.ScheduleConfig{Mode: idlegrid.ScheduleWindows, TimeZone: "America/Los_Angeles", Weekly: []idlegrid.WeeklyWindow{
				{Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}, Start: "23:00", End: "08:00"},
			}},
			floor: map[idlegrid.Tier]string{idlegrid.TierSilver: "0.45", idlegrid.TierBronze: "0.35"}},
		{name: "gg-3090-01", gpus: "1xRTX3090", region: "us-west", residency: "US", cpuCores: 16, ramMB: 64 << 10, diskGB: 1000,
			schedule: alwaysOn, floor: map[idlegrid.Tier]string{idlegrid.TierSilver: "0.26", idlegrid.TierBronze: "0.18"},
			kinds: []idlegrid.WorkloadKind{idlegrid.KindInference, idlegrid.KindEval, idlegrid.KindFineTune}},
	}},
	{name: "merlion-cloud", nodes: []devNode{
		{name: "ml-t4-01", gpus: "8xT4", region: "ap-southeast", residency: "SG", cpuCores: 48, ramMB: 192 << 10, diskGB: 2000,
			schedule: alwaysOn, floor: tiers("0.19", "0.15", "0.09")},
		{name: "ml-4090-01", gpus: "4xRTX4090", region: "ap-southeast", residency: "SG", cpuCores: 32, ramMB: 128 << 10, diskGB: 2000,
			schedule: alwaysOn, floor: tiers("0.49", "0.42", "0.34"), serves: &devModel{gpu: "RTX4090", inputPrice: "0.06", outputPrice: "0.18", concurrency: 16}},
	}},
}

func tiers(gold, silver, bronze string) map[idlegrid.Tier]string {
	return map[idlegrid.Tier]string{idlegrid.TierGold: gold, idlegrid.TierSilver: silver, idlegrid.TierBronze: bronze}
}

// agentConfig is the node's agent config for a server at url.
func (n devNode) agentConfig(url, joinToken, dataDir string, speed float64) *agent.Config {
	return &agent.Config{
		Server: url, JoinToken: joinToken, DataDir: dataDir, Name: n.name,
		Region: n.region, Residency: n.residency, CPUCores: n.cpuCores, RAMMB: n.ramMB, DiskGB: n.diskGB,
		Schedule: n.schedule, Ask: agent.AskConfig{Floor: n.floor, AllowedKinds: n.kinds},
		FakeGPUs: n.gpus, FakeSpeed: speed,
	}
}

// devJob is a kind of job the demo renter submits.
type devJob struct {
	name       string
	kind       idlegrid.WorkloadKind
	image      string
	command    []string
	gpus       int
	models     []string
	tier       idlegrid.Tier
	maxPrice   idlegrid.Micros
	minSeconds int64
	maxSeconds int64
	// checkpointEvery is how often its simulated run saves its work, in
	// seconds; 0: never.
	checkpointEvery int64
	region          string
	residency       string
	impossible      bool // no node can ever take it: it shows how a queued job says why
	// pullSeconds is how long its node takes to pull its image (the fake
	// runtime's simulated pull, at dev's speed), imageMB the image's size:
	// it shows a slow start, and its progress, in job watch.
	pullSeconds, imageMB int
}

func cents(n int64) idlegrid.Micros {
	return idlegrid.Micros(n) * idlegrid.MicrosPerUnit / 100
}

// devJobs is the demo renter's repertoire: training, fine-tuning, eval and
// batch inference in all three tiers, and a few jobs that cannot be placed.
var devJobs = []devJob{
	{name: "llama3-8b-finetune", kind: idlegrid.KindFineTune, image: "ghcr.io/acme/axolotl:0.6", command: []string{"accelerate", "launch", "-m", "axolotl.cli.train", "llama3.yml"},
		gpus: 2, models: []string{"H100-80GB", "A100-80GB"}, tier: idlegrid.TierGold, maxPrice: cents(260), minSeconds: 60, maxSeconds: 120},
	{name: "resnet50-train", kind: idlegrid.KindTraining, image: "ghcr.io/acme/torchvision:2.5", command: []string{"python", "train.py", "--arch", "resnet50"},
		gpus: 1, models: []string{"RTX4090", "RTX3090", "L40S"}, tier: idlegrid.TierSilver, maxPrice: cents(95), minSeconds: 40, maxSeconds: 100},
	{name: "whisper-batch", kind: idlegrid.KindInference, image: "ghcr.io/acme/whisperx:3.1", command: []string{"python", "transcribe.py", "--shard", "7"},
		gpus: 1, models: []string{"T4", "RTX3090"}, tier: idlegrid.TierBronze, maxPrice: cents(20), minSeconds: 20, maxSeconds: 60, checkpointEvery: 10},
	{name: "mmlu-eval", kind: idlegrid.KindEval, image: "ghcr.io/acme/lm-eval:0.4", command: []string{"lm_eval", "--tasks", "mmlu"},
		gpus: 1, tier: idlegrid.TierSilver, maxPrice: cents(120), minSeconds: 20, maxSeconds: 60, residency: "EU"},
	{name: "sdxl-render", kind: idlegrid.KindInference, image: "ghcr.io/acme/diffusers:0.31", command: []string{"python", "render.py", "--batch", "64"},
		gpus: 2, models: []string{"RTX4090"}, tier: idlegrid.TierBronze, maxPrice: cents(45), minSeconds: 30, maxSeconds: 90, checkpointEvery: 15},
	{name: "gpt2-pretrain", kind: idlegrid.KindTraining, image: "ghcr.io/acme/nanogpt:1.0", command: []string{"torchrun", "--nproc_per_node=4", "train.py"},
		gpus: 4, models: []string{"H100-80GB"}, tier: idlegrid.TierGold, maxPrice: cents(275), minSeconds: 60, maxSeconds: 120, region: "us-east"},
	{name: "mistral-lora-eu", kind: idlegrid.KindFineTune, image: "ghcr.io/acme/peft:0.13", command: []string{"python", "lora.py"},
		gpus: 1, models: []string{"A100-80GB", "L40S"}, tier: idlegrid.TierSilver, maxPrice: cents(160), minSeconds: 40, maxSeconds: 120, residency: "EU",
		pullSeconds: 45, imageMB: 14 << 10},
	{name: "embeddings-backfill", kind: idlegrid.KindInference, image: "ghcr.io/acme/tei:1.5", command: []string{"python", "embed.py"},
		gpus: 1, tier: idlegrid.TierBronze, maxPrice: cents(40), minSeconds: 20, maxSeconds: 80},
	{name: "safety-eval-sg", kind: idlegrid.KindEval, image: "ghcr.io/acme/evals:2.0", command: []string{"python", "run_evals.py"},
		gpus: 1, tier: idlegrid.TierGold, maxPrice: cents(60), minSeconds: 20, maxSeconds: 60, residency: "SG"},

	{name: "h100-bargain-hunt", kind: idlegrid.KindTraining, image: "ghcr.io/acme/nanogpt:1.0",
		gpus: 1, models: []string{"H100-80GB"}, tier: idlegrid.TierGold, maxPrice: cents(50), minSeconds: 60, maxSeconds: 60, impossible: true},
	{name: "tokyo-residency", kind: idlegrid.KindEval, image: "ghcr.io/acme/evals:2.0",
		gpus: 1, tier: idlegrid.TierSilver, maxPrice: cents(300), minSeconds: 30, maxSeconds: 30, residency: "JP", impossible: true},
	{name: "sixteen-gpu-run", kind: idlegrid.KindTraining, image: "ghcr.io/acme/megatron:24.09",
		gpus: 16, tier: idlegrid.TierSilver, maxPrice: cents(300), minSeconds: 60, maxSeconds: 60, impossible: true},
}
