package session

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the registry's metrics, for the registry GET /metrics
// serves: the agents' sessions open now, opened since the server started,
// and replaced by a reconnecting agent, and the streams refused past a
// session's limit.
func (r *Registry) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idlegrid_agent_sessions", Help: "Agents' sessions open now, one per node at most.",
		}, func() float64 { return float64(r.live()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "idlegrid_agent_sessions_opened_total", Help: "Agents' sessions opened.",
		}, func() float64 { return float64(r.opened.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "idlegrid_agent_sessions_replaced_total", Help: "Sessions closed because their agent opened another (it reconnected).",
		}, func() float64 { return float64(r.replaced.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "idlegrid_agent_session_streams_refused_total", Help: "Streams agents opened past the most a session may hold open (Config.MaxPeerStreams), closed as they opened.",
		}, func() float64 { return float64(r.cfg.Refused.Load()) }),
	}
}

// live is the number of sessions open now.
func (r *Registry) live() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byNode)
}
