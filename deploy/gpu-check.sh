#!/bin/bash
# gpu-check.sh: check the hardware challenge on this machine's NVIDIA GPUs,
# end to end (docs/trust.md, "What was run").
#
#   1. the device test: go test -tags gpu -run GPU ./internal/gpu/cuda
#      (every GPU NVML sees: CUDA's UUIDs match NVML's, N=256 checked row by
#      row against the CPU, then the coordinator's size judged as it would);
#   2. a throwaway server (SQLite, 127.0.0.1:7171) and a real agent on this
#      machine's GPUs, workloads simulated (--runtime fake, so no Docker is
#      needed), until the node's join challenge is judged.
#
# It needs the NVIDIA driver and cuBLAS (set IDLEGRID_CUBLAS to its path if
# the loader does not find it). Run it from the repository with Go installed,
# or on a machine without Go with BIN set to a folder holding the two
# binaries built elsewhere:
#
#   go build -o bin/idlegrid ./cmd/idlegrid
#   go test -c -tags gpu -o bin/cuda.test ./internal/gpu/cuda
#   BIN=bin deploy/gpu-check.sh
#
# It exits 0 when both parts pass.
set -u
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
if [ -z "${BIN:-}" ]; then
	BIN=$work/bin
	go build -o "$BIN/idlegrid" ./cmd/idlegrid &&
		go test -c -tags gpu -o "$BIN/cuda.test" ./internal/gpu/cuda || exit 2
fi
BIN=$(cd "$BIN" && pwd)
ig=$BIN/idlegrid

echo "== the GPUs"
nvidia-smi --query-gpu=name,memory.total,driver_version,uuid,vbios_version --format=csv

echo "== the device test"
(cd "$work" && "$BIN/cuda.test" -test.run GPU -test.v -test.timeout 10m)
test_rc=$?

echo "== a server and an agent: the join challenge"
export IDLEGRID_ADDR=http://127.0.0.1:7171
"$ig" server --listen 127.0.0.1:7171 --db "$work/ig.db" --audit-key "$work/audit.key" \
	--bootstrap-admin-key-file "$work/admin.key" >"$work/server.log" 2>&1 &
for _ in $(seq 100); do
	[ -s "$work/admin.key" ] && curl -sf $IDLEGRID_ADDR/v1/healthz >/dev/null && break
	sleep 0.2
done
if ! curl -sf $IDLEGRID_ADDR/v1/healthz >/dev/null; then
	echo "the server did not start in 20 s; its log:"
	cat "$work/server.log"
	exit 1
fi
secret() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("secret") or d["key"]["secret"])'; }
provider=$(IDLEGRID_KEY=$(cat "$work/admin.key") "$ig" account create --name gpu-check --role provider --json | secret)
export IDLEGRID_KEY=$provider
token=$("$ig" token create --name gpu-check --json | secret)
"$ig" agent init --region us-east --ask 2.00 --windows always --server $IDLEGRID_ADDR \
	--data "$work/agent" --config "$work/agent.yaml" || exit 1
"$ig" agent --config "$work/agent.yaml" --runtime fake --join-token "$token" >"$work/agent.log" 2>&1 &
node="" state=""
for _ in $(seq 300); do
	node=$("$ig" node ls --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[0]["id"] if d else "")' 2>/dev/null)
	if [ -n "$node" ]; then
		# every challenge's state, once none is waiting for an answer
		state=$("$ig" node challenges "$node" --json 2>/dev/null |
			python3 -c 'import json,sys; s=[c["state"] for c in json.load(sys.stdin)]; print(" ".join(s) if s and "issued" not in s else "")' 2>/dev/null)
		[ -n "$state" ] && break
	fi
	sleep 1
done
"$ig" node hardware "$node"
echo "-- the agent's log"
cat "$work/agent.log"

echo "== results"
echo "device test: $([ $test_rc = 0 ] && echo passed || echo "FAILED ($test_rc)")"
echo "join challenge: ${state:-not judged in 5 minutes}"
[ $test_rc = 0 ] && [ -n "$state" ] && [ -z "$(echo $state | tr ' ' '\n' | grep -v '^passed$')" ]
