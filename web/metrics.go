package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus series, on a registry of its own
// (never the global one), named the way vLLM and SGLang name theirs with
// an edgellmd_ prefix, so dashboards made for those read these.
type metrics struct {
	reg *prometheus.Registry

	ttft          prometheus.Histogram
	tpot          prometheus.Histogram
	e2e           prometheus.Histogram
	promptTokens  prometheus.Counter
	genTokens     prometheus.Counter
	requests      *prometheus.CounterVec // by finish reason or "error"
	cacheQueries  prometheus.Counter     // tokens looked up in the prefix cache
	cacheHits     prometheus.Counter     // tokens served from it
	draftTokens   prometheus.Counter
	acceptedDraft prometheus.Counter
	drafts        prometheus.Counter     // verify steps with a draft
	acceptedAtPos *prometheus.CounterVec // by draft depth (0-based, as vLLM)
}

func newMetrics(s *Server) *metrics {
	reg := prometheus.NewRegistry()
	// Bucket bounds in seconds: vLLM's, with finer ones below 10 ms because
	// a small model on an edge CPU answers that fast.
	ttftBuckets := []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
		1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640}
	tpotBuckets := []float64{0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04,
		0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5}
	e2eBuckets := []float64{0.01, 0.025, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30,
		40, 50, 60, 120, 240, 480, 960, 1920}
	model := prometheus.Labels{"model_name": s.opt.ModelName}
	f := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Name: name, Help: help, ConstLabels: model}
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: model, Buckets: buckets})
	}
	m := &metrics{
		reg:           reg,
		ttft:          hist("edgellmd_time_to_first_token_seconds", "Time from a request's arrival to its first output token.", ttftBuckets),
		tpot:          hist("edgellmd_time_per_output_token_seconds", "Mean time per output token after the first, per request.", tpotBuckets),
		e2e:           hist("edgellmd_e2e_request_latency_seconds", "Time from a generation request's arrival to its response's end.", e2eBuckets),
		promptTokens:  prometheus.NewCounter(prometheus.CounterOpts(f("edgellmd_prompt_tokens_total", "Prompt tokens of the generations run."))),
		genTokens:     prometheus.NewCounter(prometheus.CounterOpts(f("edgellmd_generation_tokens_total", "Output tokens generated."))),
		cacheQueries:  prometheus.NewCounter(prometheus.CounterOpts(f("edgellmd_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache."))),
		cacheHits:     prometheus.NewCounter(prometheus.CounterOpts(f("edgellmd_prefix_cache_hits_total", "Prompt tokens served from the prefix cache."))),
		draftTokens:   prometheus.NewCounter(prometheus.CounterOpts(f("edgellmd_spec_decode_num_draft_tokens_total", "Draft tokens proposed by speculative decoding."))),
		acceptedDraft: prometheus.NewCounter(prometheus.CounterOpts(f("edgellmd_spec_decode_num_accepted_tokens_total", "Draft tokens accepted by verification."))),
		drafts: prometheus.NewCounter(prometheus.CounterOpts(f("edgellmd_spec_decode_num_drafts_total",
			"Verify steps that had a draft; mean accepted length = 1 + accepted tokens / drafts."))),
		acceptedAtPos: prometheus.NewCounterVec(prometheus.CounterOpts(f("edgellmd_spec_decode_num_accepted_tokens_per_pos_total",
			"Verify steps whose accepted draft reached this position (0 = the first draft token).")), []string{"position"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts(f("edgellmd_request_success_total",
			"Generation requests finished, by finish reason (\"error\" when they failed).")), []string{"finished_reason"}),
	}
	sched := s.opt.Scheduler
	gauge := func(name, help string, v func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts(f(name, help)), v)
	}
	reg.MustRegister(
		m.ttft, m.tpot, m.e2e, m.promptTokens, m.genTokens, m.requests,
		m.cacheQueries, m.cacheHits, m.draftTokens, m.acceptedDraft, m.drafts, m.acceptedAtPos,
		gauge("edgellmd_num_requests_running", "Requests the engine worker is generating.", func() float64 {
			if sched == nil {
				return 0
			}
			return float64(sched.Running())
		}),
		gauge("edgellmd_num_requests_waiting", "Requests queued for the engine worker.", func() float64 {
			if sched == nil {
				return 0
			}
			return float64(sched.Waiting())
		}),
		gauge("edgellmd_engine_broken", "1 when a forward pass panicked and the engine runs nothing more until a restart (/health answers 503), else 0.", func() float64 {
			if s.engineBroken() != nil {
				return 1
			}
			return 0
		}),
		newMachineCollector(s.opt.Status),
		newSettingsCollector(s.opt.Status, model),
		newCacheCollector(sched, model),
		newBatchCollector(sched, model),
		newDeviceCollector(sched, model),
		prometheus.NewCounterFunc(prometheus.CounterOpts(f("edgellmd_connections_refused_total",
			"Connections answered 503 at once for api.max_connections or api.max_connections_per_client.")), func() float64 {
			if s.opt.ConnLimit == nil {
				return 0
			}
			return float64(s.opt.ConnLimit.Refused())
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts(f("edgellmd_session_keys_total",
			"Distinct X-Session-Key values seen on generation requests (a capped set of 65536: once full it is emptied, and a key seen again counts again).")), func() float64 {
			return float64(s.sessionKeys.count())
		}),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// observe records one finished request; rec is what its handler recorded.
func (m *metrics) observe(rec *record, status int, elapsed time.Duration) {
	if !rec.generation || !rec.ran() {
		return
	}
	m.promptTokens.Add(float64(rec.promptTokens))
	m.genTokens.Add(float64(rec.outputTokens))
	m.cacheQueries.Add(float64(rec.promptTokens))
	m.cacheHits.Add(float64(rec.cachedTokens))
	m.draftTokens.Add(float64(rec.spec.Drafted))
	m.acceptedDraft.Add(float64(rec.spec.Accepted))
	m.drafts.Add(float64(rec.spec.Drafts))
	for i, n := range rec.spec.AcceptedAt {
		if n > 0 {
			m.acceptedAtPos.WithLabelValues(strconv.Itoa(i)).Add(float64(n))
		}
	}
	m.e2e.Observe(elapsed.Seconds())
	if rec.ttft > 0 {
		m.ttft.Observe(rec.ttft.Seconds())
	}
	if rec.tpot > 0 {
		m.tpot.Observe(rec.tpot.Seconds())
	}
	reason := rec.finish
	if status >= 400 || rec.err != "" || reason == "" {
		reason = "error"
	}
	m.requests.WithLabelValues(reason).Inc()
}

// ran says the request reached the engine: it has an outcome.
func (r *record) ran() bool { return r.finish != "" || r.outputTokens > 0 || r.ttft > 0 }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// machineCollector reads the power mode and the machine's telemetry from
// the StatusSource at scrape time.
type machineCollector struct {
	src                                                            StatusSource
	modeInfo, pinned, drifts, temp, rail, gpuHz, memUsed, memTotal *prometheus.Desc
}

func newMachineCollector(src StatusSource) *machineCollector {
	d := prometheus.NewDesc
	return &machineCollector{
		src: src,
		modeInfo: d("edgellmd_power_mode_info",
			"The power mode nvpmodel reports (1 for the mode in force).", []string{"name", "id"}, nil),
		pinned: d("edgellmd_power_mode_pinned",
			"1 when the power mode is the configured one, 0 when not (or when none is configured).", nil, nil),
		drifts: d("edgellmd_power_mode_drifts_total",
			"Times the power mode was found moved off the configured one.", nil, nil),
		temp:     d("edgellmd_temperature_celsius", "Temperature of a thermal zone.", []string{"zone", "type"}, nil),
		rail:     d("edgellmd_power_rail_watts", "Power drawn on a monitored rail.", []string{"rail", "sensor"}, nil),
		gpuHz:    d("edgellmd_gpu_frequency_hertz", "The GPU's current clock.", []string{"device"}, nil),
		memUsed:  d("edgellmd_memory_used_bytes", "Memory in use (unified CPU and GPU memory on a Jetson).", nil, nil),
		memTotal: d("edgellmd_memory_total_bytes", "Memory installed.", nil, nil),
	}
}

func (c *machineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.modeInfo, c.pinned, c.drifts, c.temp, c.rail, c.gpuHz, c.memUsed, c.memTotal} {
		ch <- d
	}
}

func (c *machineCollector) Collect(ch chan<- prometheus.Metric) {
	pinned := 0.0
	modeSent := false
	defer func() {
		// Off a Jetson there is no mode; the series stays, empty and 0, so
		// dashboards and alerts find it.
		if !modeSent {
			ch <- prometheus.MustNewConstMetric(c.modeInfo, prometheus.GaugeValue, 0, "", "")
		}
	}()
	if c.src == nil {
		ch <- prometheus.MustNewConstMetric(c.pinned, prometheus.GaugeValue, pinned)
		return
	}
	if st, ok := c.src.Power(); ok {
		if st.Mode != nil {
			ch <- prometheus.MustNewConstMetric(c.modeInfo, prometheus.GaugeValue, 1, st.Mode.Name, strconv.Itoa(st.Mode.ID))
			modeSent = true
		}
		if st.Pinned {
			pinned = 1
		}
		ch <- prometheus.MustNewConstMetric(c.drifts, prometheus.CounterValue, float64(st.Drifts))
	}
	ch <- prometheus.MustNewConstMetric(c.pinned, prometheus.GaugeValue, pinned)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rd := c.src.Telemetry(ctx)
	seen := map[string]bool{} // duplicate label sets would fail the scrape
	for _, z := range rd.Thermal {
		if z.OK && !seen["t"+z.Zone] {
			seen["t"+z.Zone] = true
			ch <- prometheus.MustNewConstMetric(c.temp, prometheus.GaugeValue, z.Celsius, z.Zone, z.Type)
		}
	}
	for _, r := range rd.Rails {
		if r.OK && !seen["r"+r.Name+r.Sensor] {
			seen["r"+r.Name+r.Sensor] = true
			ch <- prometheus.MustNewConstMetric(c.rail, prometheus.GaugeValue, r.MilliWatts/1000, r.Name, r.Sensor)
		}
	}
	if rd.GPU.OK {
		ch <- prometheus.MustNewConstMetric(c.gpuHz, prometheus.GaugeValue, float64(rd.GPU.CurHz), rd.GPU.Device)
	}
	if rd.Memory.OK {
		ch <- prometheus.MustNewConstMetric(c.memUsed, prometheus.GaugeValue, float64(rd.Memory.UsedBytes))
		ch <- prometheus.MustNewConstMetric(c.memTotal, prometheus.GaugeValue, float64(rd.Memory.TotalBytes))
	}
}
