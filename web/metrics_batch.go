package web

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgellmd/edgellmd/engine"
)

// batchCollector reads the engine's forward-pass counts at scrape time:
// how many sequences each pass served, and the prompt chunks run; and its
// sequence memory: the budget, what the sequence states hold, the requests
// waiting for memory.
type batchCollector struct {
	sched                          *engine.Scheduler
	maxSeqs, passes, sizes, chunks *prometheus.Desc
	budgeted, prefillTokens        *prometheus.Desc
	memBudget, memUsed, memWaiting *prometheus.Desc
	memWaits                       *prometheus.Desc
}

func newBatchCollector(sched *engine.Scheduler, model prometheus.Labels) *batchCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, model) }
	return &batchCollector{
		sched:   sched,
		maxSeqs: d("edgellmd_max_sequences", "Requests the engine generates at once (engine.max_sequences)."),
		passes:  d("edgellmd_forward_passes_total", "Forward passes run (each serves one or more sequences)."),
		sizes:   d("edgellmd_batch_sequences", "Sequences served per forward pass."),
		chunks:  d("edgellmd_prefill_chunks_total", "Prompt chunks prefilled (engine.prefill_chunk tokens at most, each in a pass beside the others' decode steps)."),
		budgeted: d("edgellmd_prefill_chunks_budgeted_total",
			"Prompt chunks cut short by the per-pass token budget beside others' decode steps (engine.decode_slowdown)."),
		prefillTokens: d("edgellmd_prefill_tokens_total", "Prompt tokens prefilled in chunks."),
		memBudget: d("edgellmd_memory_budget_bytes",
			"Bytes the sequence states may hold in all (engine.memory_budget, or derived from the memory available at start; 0: no bound)."),
		memUsed: d("edgellmd_sequence_memory_bytes",
			"Bytes the sequence states hold: KV and recurrent state of the running requests and of idle slots kept for reuse."),
		memWaiting: d("edgellmd_num_requests_waiting_memory", "Queued requests that would start but for the memory budget."),
		memWaits:   d("edgellmd_memory_waits_total", "Requests that waited for the memory budget before starting."),
	}
}

func (c *batchCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.maxSeqs, c.passes, c.sizes, c.chunks, c.budgeted, c.prefillTokens, c.memBudget, c.memUsed, c.memWaiting, c.memWaits} {
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
	ch <- prometheus.MustNewConstMetric(c.budgeted, prometheus.CounterValue, float64(st.BudgetedChunks))
	ch <- prometheus.MustNewConstMetric(c.prefillTokens, prometheus.CounterValue, float64(st.PrefillTokens))
	mem := e.MemoryStats()
	ch <- prometheus.MustNewConstMetric(c.memBudget, prometheus.GaugeValue, float64(mem.BudgetBytes))
	ch <- prometheus.MustNewConstMetric(c.memUsed, prometheus.GaugeValue, float64(mem.InUseBytes))
	ch <- prometheus.MustNewConstMetric(c.memWaiting, prometheus.GaugeValue, float64(mem.WaitingForMemory))
	ch <- prometheus.MustNewConstMetric(c.memWaits, prometheus.CounterValue, float64(mem.MemoryWaits))
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
