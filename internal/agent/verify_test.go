package agent_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/idlegrid/idlegrid"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// A verifiable job's success carries the digest of its standard output,
// which depends on its inputs only: two leases of the same work on
// different GPUs print the same; other work prints otherwise.
func TestAgent_OutputDigest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := &fakeServer{}, &rtfake.Runtime{}
		r := startAgent(t, testConfig(t), srv, rt)
		verifiable := job(60, nil)
		verifiable.Verifiable = true
		other := verifiable
		other.Command = []string{"python", "train.py", "--seed", "2"}
		r.assign(srv, "lease_a", verifiable)
		r.assign(srv, "lease_b", verifiable)
		r.assign(srv, "lease_c", other)
		r.assign(srv, "lease_d", job(60, nil))
		digest := map[string]string{}
		for _, id := range []string{"lease_a", "lease_b", "lease_c", "lease_d"} {
			waitFor(t, id+" to succeed", leaseIn(srv, id, idlegrid.LeaseSucceeded))
			rs := srv.reportsFor(id)
			digest[id] = rs[len(rs)-1].OutputDigest
		}
		if d := digest["lease_a"]; !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
			t.Fatalf("digest = %q, want sha256: and 64 hex digits", d)
		}
		if digest["lease_a"] != digest["lease_b"] {
			t.Errorf("the same work printed %s and %s", digest["lease_a"], digest["lease_b"])
		}
		if digest["lease_c"] == digest["lease_a"] {
			t.Errorf("other work printed the same digest %s", digest["lease_c"])
		}
		if digest["lease_d"] != "" {
			t.Errorf("a job that is not verifiable reported digest %q", digest["lease_d"])
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		rt.Close()
	})
}
