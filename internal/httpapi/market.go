package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

// GET /v1/nodes?name=N&state=S,T&gpu_model=A,B&region=C,D&min_gpus=N&min_vram_mb=N&min_level=N&tier=T&max_price_micros_per_gpu_hour=N&min_free_gpus=N&sort=S&limit=N&after=ID
func (a *api) listNodes(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "name", "state", "gpu_model", "region", "min_gpus", "min_vram_mb", "min_level", "tier", "max_price_micros_per_gpu_hour",
		"min_free_gpus", "sort", "limit", "after")
	if err != nil {
		return err
	}
	f, err := nodeSearch(q)
	if err != nil {
		return err
	}
	nodes, free, err := a.srv.ListNodes(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Nodes{Nodes: nonNil(nodes), FreeGPUs: free})
}

// nodeSearch reads a node list's search: a node name; states, GPU models
// and regions, each a comma-separated list (any of them); the least GPUs, GPU memory, trust
// level and GPUs free now; a tier and the most its floor may be; an order; a limit; and
// the node a page starts after.
// Every parameter at fault is named.
func nodeSearch(q query) (idlegrid.NodeFilter, error) {
	f := idlegrid.NodeFilter{Name: q.string("name"), GPUModels: q.words("gpu_model"), Regions: q.words("region"),
		Tier: idlegrid.Tier(q.string("tier")), Sort: idlegrid.NodeSort(q.string("sort")), After: q.string("after")}
	var p idlegrid.Faults
	states, err := list(q, "state", idlegrid.NodeStates)
	f.States = states
	p.Also(err)
	number := func(name string, max int64) int64 {
		n, err := q.int(name, 0, 1, max)
		p.Also(err)
		return n
	}
	f.Limit = int(number("limit", maxLimit))
	f.MinGPUs = int(number("min_gpus", 64)) // an offer lists at most 64
	f.MinFreeGPUs = int(number("min_free_gpus", 64))
	f.MinVRAMMB = int(number("min_vram_mb", 1<<30))
	f.MinLevel = int(number("min_level", idlegrid.MaxTrustLevel))
	f.MaxFloor = idlegrid.Micros(number("max_price_micros_per_gpu_hour", int64(1000*idlegrid.MicrosPerUnit))) // as a job's cap
	p.Check(f.Name == "" || idlegrid.ValidNodeName(f.Name), "name", "%q is not a node's name: 1-63 letters, digits, '.', '_' or '-'", f.Name)
	p.Check(len(f.GPUModels) <= maxSearchTerms, "gpu_model", "names at most %d models", maxSearchTerms)
	p.Check(len(f.Regions) <= maxSearchTerms, "region", "names at most %d regions", maxSearchTerms)
	for _, r := range f.Regions {
		if !idlegrid.ValidRegion(r) {
			p.Add("region", "%q is not a region: lower-case letters, digits and '-', e.g. eu-west", r)
			break
		}
	}
	p.Check(f.Tier == "" || f.Tier.Valid(), "tier", "must be gold, silver or bronze, got %q", f.Tier)
	p.Check(f.Sort == "" || slices.Contains(idlegrid.NodeSorts, f.Sort), "sort", "must be %s, got %q", idlegrid.OrList(idlegrid.NodeSorts), f.Sort)
	return f, p.Err()
}

// maxSearchTerms bounds each list of a node search.
const maxSearchTerms = 32

// GET /v1/nodes/{id}
func (a *api) findNode(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	n, err := a.srv.FindNode(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, n)
}

// POST /v1/jobs, with an optional Idempotency-Key header: sent again with
// the same key and spec, it answers 200 with the job the first made, and
// Idempotent-Replayed: true.
func (a *api) submitJob(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	key := r.Header.Get(wire.HeaderIdempotencyKey)
	if _, given := r.Header[wire.HeaderIdempotencyKey]; given {
		if err := ledger.CheckIdempotencyKey(wire.HeaderIdempotencyKey, key); err != nil {
			return err
		}
	}
	var spec idlegrid.JobSpec
	if err := a.readJSON(w, r, &spec); err != nil {
		return err
	}
	j, replayed, err := a.srv.SubmitJobOnce(r.Context(), spec, key)
	if err != nil {
		return err
	} else if replayed {
		w.Header().Set(wire.HeaderIdempotentReplayed, "true")
		return writeJSON(w, http.StatusOK, j)
	}
	return writeJSON(w, http.StatusCreated, j)
}

// GET /v1/jobs?state=queued,running&limit=N&before=ID&name=PREFIX
func (a *api) listJobs(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "state", "limit", "before", "name")
	if err != nil {
		return err
	}
	f := idlegrid.JobFilter{Before: q.string("before"), NamePrefix: q.string("name")}
	if f.States, err = list(q, "state", jobStates); err != nil {
		return err
	}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	jobs, err := a.srv.ListJobs(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Jobs{Jobs: nonNil(jobs)})
}

// GET /v1/jobs/{id}
func (a *api) findJob(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	j, err := a.srv.FindJob(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, j)
}

// GET /v1/jobs/{id}/watch?wait=SECONDS answers the job and its leases
// ({"job", "leases"}) with their version as the ETag. Given the version
// last seen (If-None-Match), it waits up to wait (capped at
// Options.MaxWait) for a change, and answers 304 if none came: a watch
// sees each change as it is stored, without polling.
func (a *api) watchJob(w http.ResponseWriter, r *http.Request) error {
	wait, err := a.longPollWait(r)
	if err != nil {
		return err
	}
	seen := strings.Trim(strings.TrimPrefix(r.Header.Get("If-None-Match"), "W/"), `"`)
	v, version, err := a.srv.WatchJob(r.Context(), r.PathValue("id"), seen, wait)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", `"`+version+`"`)
	if version == seen {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	return writeJSON(w, http.StatusOK, v)
}

// POST /v1/jobs/{id}/cancel
func (a *api) cancelJob(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	j, err := a.srv.CancelJob(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, j)
}

// GET /v1/leases?job_id=&node_id=&state=&limit=&before=
func (a *api) listLeases(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "job_id", "node_id", "state", "limit", "before")
	if err != nil {
		return err
	}
	f := idlegrid.LeaseFilter{JobID: q.string("job_id"), NodeID: q.string("node_id"), Before: q.string("before")}
	if f.States, err = list(q, "state", leaseStates); err != nil {
		return err
	}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	leases, err := a.srv.ListLeases(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Leases{Leases: nonNil(leases)})
}

// GET /v1/leases/{id}
func (a *api) findLease(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	l, events, err := a.srv.FindLease(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.LeaseDetail{Lease: l, Events: nonNil(events)})
}

// GET /v1/leases/{id}/logs?after=SEQ&limit=N or ?tail=N
func (a *api) leaseLogs(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "after", "limit", "tail")
	if err != nil {
		return err
	}
	f := idlegrid.LogFilter{LeaseID: r.PathValue("id")}
	if f.After, err = q.int("after", 0, 0, 1<<62); err != nil {
		return err
	}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	tail, err := q.int("tail", 0, 1, 10000)
	if err != nil {
		return err
	} else if tail > 0 && f.Limit > 0 {
		return idlegrid.Invalid("tail", "give tail (the last N lines) or limit (the first N), not both")
	} else if tail > 0 && q.values.Has("after") {
		return idlegrid.Invalid("tail", "give tail (the last N lines) or after (the lines after line N), not both")
	} else if tail > 0 {
		f.Limit, f.Tail = int(tail), true
	}
	lines, err := a.srv.LeaseLogs(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Logs{Lines: nonNil(lines)})
}
