package web

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgellmd/edgellmd/engine"
)

// settingsCollector exports the hot-reloadable settings in force and the
// outcome of the last config reload, read from the StatusSource at scrape
// time, so a dashboard sees a draft edit take effect (or be refused).
type settingsCollector struct {
	src                   StatusSource
	draft, reloadOK, reAt *prometheus.Desc
	restart               *prometheus.Desc
}

func newSettingsCollector(src StatusSource, model prometheus.Labels) *settingsCollector {
	d := prometheus.NewDesc
	return &settingsCollector{
		src: src,
		draft: d("edgellmd_spec_decode_config",
			"The speculative decoding parameters in force (always 1; the labels carry them).",
			[]string{"mode", "steps", "top_k", "verify_nodes", "drafters"}, model),
		reloadOK: d("edgellmd_config_last_reload_successful",
			"1 when the last config reload was applied, 0 when the file was refused (the running config stays).", nil, model),
		reAt: d("edgellmd_config_last_reload_timestamp_seconds",
			"When the config was last reloaded (unix time).", nil, model),
		restart: d("edgellmd_config_restart_required",
			"1 when the last reload changed settings that take effect only after a restart.", nil, model),
	}
}

func (c *settingsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.draft
	ch <- c.reloadOK
	ch <- c.reAt
	ch <- c.restart
}

func (c *settingsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src == nil {
		return
	}
	set := c.src.Settings()
	dr := set.Draft
	if dr.Mode == "" {
		dr.Mode = "off"
	}
	ch <- prometheus.MustNewConstMetric(c.draft, prometheus.GaugeValue, 1, dr.Mode, strconv.Itoa(dr.Steps),
		strconv.Itoa(dr.TopK), strconv.Itoa(dr.VerifyNodes), strings.Join(dr.Drafters, ","))
	if r := set.LastReload; r != nil {
		ok, restart := 1.0, 0.0
		if r.Err != "" {
			ok = 0
		}
		if len(r.RestartRequired) > 0 {
			restart = 1
		}
		ch <- prometheus.MustNewConstMetric(c.reloadOK, prometheus.GaugeValue, ok)
		ch <- prometheus.MustNewConstMetric(c.reAt, prometheus.GaugeValue, float64(r.At.UnixNano())/1e9)
		ch <- prometheus.MustNewConstMetric(c.restart, prometheus.GaugeValue, restart)
	}
}

// cacheCollector exports the engine's prefix cache figures at scrape time.
type cacheCollector struct {
	sched                                        *engine.Scheduler
	entries, ram, diskEntries, disk, restoredE   *prometheus.Desc
	restoreSec, skipped, diskHits, droppedWrites *prometheus.Desc
}

func newCacheCollector(sched *engine.Scheduler, model prometheus.Labels) *cacheCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, model) }
	return &cacheCollector{
		sched:         sched,
		entries:       d("edgellmd_prefix_cache_entries", "Snapshots held in memory."),
		ram:           d("edgellmd_prefix_cache_ram_bytes", "Memory held by the prefix cache."),
		diskEntries:   d("edgellmd_prefix_cache_disk_entries", "Snapshots indexed on disk."),
		disk:          d("edgellmd_prefix_cache_disk_bytes", "Size of the prefix cache's segment files."),
		restoredE:     d("edgellmd_prefix_cache_restored_entries", "Snapshots found on disk at start."),
		restoreSec:    d("edgellmd_prefix_cache_restore_seconds", "Time the scan of the cache files at start took (so far, while it runs)."),
		skipped:       d("edgellmd_prefix_cache_skipped_records_total", "Damaged, truncated or inconsistent records dropped."),
		diskHits:      d("edgellmd_prefix_cache_disk_hit_tokens_total", "Prompt tokens restored by reading a snapshot back from disk."),
		droppedWrites: d("edgellmd_prefix_cache_dropped_writes_total", "Snapshots not written to disk: the writer's queue was full, the snapshot was too large, or the write failed (a full disk)."),
	}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.entries, c.ram, c.diskEntries, c.disk, c.restoredE, c.restoreSec, c.skipped, c.diskHits, c.droppedWrites} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	if c.sched == nil {
		return
	}
	st, ok := c.sched.Engine().CacheStats()
	if !ok {
		return
	}
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	k := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	g(c.entries, float64(st.Entries))
	g(c.ram, float64(st.Bytes))
	g(c.diskEntries, float64(st.DiskEntries))
	g(c.disk, float64(st.DiskBytes))
	g(c.restoredE, float64(st.RestoredEntries))
	g(c.restoreSec, st.RestoreSeconds)
	k(c.skipped, float64(st.SkippedRecords))
	k(c.diskHits, float64(st.DiskHitTokens))
	k(c.droppedWrites, float64(st.DroppedWrites))
}

// deviceCollector exports what the engine runs on, and on a GPU the device
// memory in use, at scrape time.
type deviceCollector struct {
	sched                 *engine.Scheduler
	info, memUsed, memTot *prometheus.Desc
	// The GPU's matrix path: tensor cores in use (1) or not, the
	// multiply-adds of its matrix products by path, weights in place.
	tensorCores, macs, inPlace *prometheus.Desc
}

func newDeviceCollector(sched *engine.Scheduler, model prometheus.Labels) *deviceCollector {
	d := prometheus.NewDesc
	return &deviceCollector{
		sched: sched,
		info: d("edgellmd_device_info",
			"What the model runs on (always 1; the labels carry it): engine cpu or vulkan, the device's name and driver.",
			[]string{"engine", "name", "driver"}, model),
		memUsed: d("edgellmd_device_memory_used_bytes", "GPU memory held by edgellmd's buffers (weights, states, scratch); absent on the CPU.", nil, model),
		memTot:  d("edgellmd_device_memory_total_bytes", "The GPU's largest device-local memory heap; absent on the CPU.", nil, model),
		tensorCores: d("edgellmd_gpu_tensor_cores",
			"1 when the GPU multiplies prefill chunks on cooperative matrices (tensor cores; model.gpu_matmul), else 0; absent on the CPU.", nil, model),
		macs: d("edgellmd_gpu_matmul_macs_total",
			"Multiply-adds of the GPU's matrix products, by path: coopmat (tensor cores) or scalar; absent on the CPU.", []string{"path"}, model),
		inPlace: d("edgellmd_gpu_weights_in_place",
			"1 when the weights are the mapped model file's pages imported into the GPU (integrated GPUs), 0 when copied; absent on the CPU.", nil, model),
	}
}

func (c *deviceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.info
	ch <- c.memUsed
	ch <- c.memTot
	ch <- c.tensorCores
	ch <- c.macs
	ch <- c.inPlace
}

func (c *deviceCollector) Collect(ch chan<- prometheus.Metric) {
	if c.sched == nil {
		return
	}
	d := c.sched.Engine().Device()
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, d.Engine, d.Name, d.Driver)
	if d.Engine != engine.EngineCPU {
		ch <- prometheus.MustNewConstMetric(c.memUsed, prometheus.GaugeValue, float64(d.MemoryUsedBytes))
		ch <- prometheus.MustNewConstMetric(c.memTot, prometheus.GaugeValue, float64(d.MemoryTotalBytes))
		ch <- prometheus.MustNewConstMetric(c.tensorCores, prometheus.GaugeValue, b2f(d.MatMul == "coopmat"))
		ch <- prometheus.MustNewConstMetric(c.inPlace, prometheus.GaugeValue, b2f(d.WeightsInPlace))
		coop, scalar := c.sched.Engine().MatMulMACs()
		ch <- prometheus.MustNewConstMetric(c.macs, prometheus.CounterValue, float64(coop), "coopmat")
		ch <- prometheus.MustNewConstMetric(c.macs, prometheus.CounterValue, float64(scalar), "scalar")
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
