package web

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
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
