package web

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgellmd/edgellmd/engine"
)

// batchCollector reads the engine's forward-pass counts at scrape time:
// how many sequences each pass served, and the prompt chunks run.
type batchCollector struct {
	sched                          *engine.Scheduler
	maxSeqs, passes, sizes, chunks *prometheus.Desc
}

func newBatchCollector(sched *engine.Scheduler, model prometheus.Labels) *batchCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, model) }
	return &batchCollector{
		sched:   sched,
		maxSeqs: d("edgellmd_max_sequences", "Requests the engine generates at once (engine.max_sequences)."),
		passes:  d("edgellmd_forward_passes_total", "Forward passes run (each serves one or more sequences)."),
		sizes:   d("edgellmd_batch_sequences", "Sequences served per forward pass."),
		chunks:  d("edgellmd_prefill_chunks_total", "Prompt chunks prefilled (engine.prefill_chunk tokens at most, each in a pass beside the others' decode steps)."),
	}
}

func (c *batchCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.maxSeqs, c.passes, c.sizes, c.chunks} {
		ch <- d
	}
}

func (c *batchCollector) Collect(ch chan<- prometheus.Metric) {
	if c.sched == nil {
		return
	}
	e := c.sched.Engine()
	st := e.BatchStats()
	ch <- prometheus.MustNewConstMetric(c.maxSeqs, prometheus.GaugeValue, float64(e.MaxSequences()))
	ch <- prometheus.MustNewConstMetric(c.passes, prometheus.CounterValue, float64(st.Passes))
	ch <- prometheus.MustNewConstMetric(c.chunks, prometheus.CounterValue, float64(st.PrefillChunks))
	buckets := map[float64]uint64{}
	var count uint64
	var sum float64
	for i, n := range st.BySize {
		size := i + 1
		count += uint64(n)
		sum += float64(size) * float64(n)
		for _, le := range []float64{1, 2, 4, 8} {
			if float64(size) <= le {
				buckets[le] += uint64(n)
			}
		}
	}
	ch <- prometheus.MustNewConstHistogram(c.sizes, count, sum, buckets)
}
