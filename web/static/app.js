// The status page: polls /status.json and fills the page in. Charts of
// request figures come from the server's series (the last minutes);
// queue depth, temperature and power draw are kept here, one point a poll.
"use strict";

const POLL_MS = 2000;
const KEEP = 180; // points of the page's own series (6 minutes)
const local = { queue: [], temp: [], power: [] };

const $ = (id) => document.getElementById(id);
const set = (id, text, cls) => {
  const el = $(id);
  el.textContent = text;
  el.className = cls || el.className.replace(/\b(good|bad|warn)\b/g, "").trim();
};

function bytes(n) {
  if (n == null || isNaN(n)) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(n < 10 ? 2 : 1) : String(n)) + " " + u[i];
}
const ms = (v) => (v ? (v < 10 ? v.toFixed(2) : v.toFixed(0)) + " ms" : "–");
const num = (v, d) => (v == null ? "–" : Number(v).toFixed(d));
function ago(t) {
  const s = (Date.now() - Date.parse(t)) / 1000;
  if (isNaN(s)) return "–";
  if (s < 90) return Math.max(0, Math.round(s)) + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  return new Date(t).toLocaleString();
}
function duration(s) {
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  return (d ? d + "d " : "") + (d || h ? h + "h " : "") + m + "m";
}

// chart draws values (null = no data) as a line over a filled area,
// scaled from 0 to the largest value; a lone point gets a dot. The
// caption shows the latest value and the largest.
function chart(id, values) {
  const svg = $(id);
  const W = 300, H = 80, pad = 4;
  const known = values.filter((v) => v != null);
  const max = Math.max(1e-9, ...known);
  const n = values.length;
  const x = (i) => (n < 2 ? W / 2 : pad + (i / (n - 1)) * (W - 2 * pad));
  const y = (v) => H - pad - (v / max) * (H - 2 * pad);
  let line = "", area = "", dots = "", open = false, first = 0;
  values.forEach((v, i) => {
    if (v == null) {
      if (open) area += `L${x(i - 1)},${H}L${x(first)},${H}Z`;
      open = false;
      return;
    }
    const lone = (i === 0 || values[i - 1] == null) && (i === n - 1 || values[i + 1] == null);
    if (lone) dots += `<circle class="dot" cx="${x(i)}" cy="${y(v)}" r="2.5"/>`;
    if (!open) { line += `M${x(i)},${y(v)}`; area += `M${x(i)},${y(v)}`; first = i; open = true; }
    else { line += `L${x(i)},${y(v)}`; area += `L${x(i)},${y(v)}`; }
  });
  if (open) area += `L${x(n - 1)},${H}L${x(first)},${H}Z`;
  svg.innerHTML =
    `<line class="grid" x1="0" y1="${H / 2}" x2="${W}" y2="${H / 2}"/>` +
    `<path class="area" d="${area}"/><path class="line" d="${line}"/>` + dots;
  const fmt = (v) => String(+v.toPrecision(3));
  const cap = svg.previousElementSibling;
  let out = cap.querySelector("span");
  if (!out) { out = document.createElement("span"); cap.appendChild(out); }
  out.textContent = known.length ? `now ${values[n - 1] == null ? "–" : fmt(values[n - 1])} · max ${max < 1e-6 ? 0 : fmt(max)}` : "no data";
}

function push(series, v) {
  series.push(v);
  if (series.length > KEEP) series.shift();
}

function rows(table, head, data) {
  table.innerHTML = "";
  if (!data.length) return;
  const tr = table.insertRow();
  head.forEach((h) => { const th = document.createElement("th"); th.textContent = h; tr.appendChild(th); });
  data.forEach((r) => {
    const row = table.insertRow();
    r.forEach((c) => { row.insertCell().textContent = c; });
  });
}

function render(s) {
  set("uptime", "up " + duration(s.uptime_seconds) + (s.broken ? " · BROKEN: " + s.broken : s.ready ? "" : " · not ready"));

  // Power
  const p = s.power;
  if (p) {
    set("power-board", p.jetson ? (p.model || "Jetson") + (p.l4t ? " · L4T " + p.l4t : "") : "not a Jetson");
    set("power-mode", p.mode ? `${p.mode.name} (id ${p.mode.id})` : "–");
    if (!p.jetson) {
      set("power-pinned", "n/a", "muted");
    } else if (p.pinned_mode) {
      set("power-pinned", p.pinned ? "yes: " + p.pinned_mode : "no: want " + p.pinned_mode, p.pinned ? "good" : "bad");
    } else {
      set("power-pinned", "no mode configured", "muted");
    }
    set("power-drift", p.drifted ? `drifted (${p.drifts} times, ${p.repins} re-pinned)` :
      p.drifts ? `steady (${p.drifts} drifts, ${p.repins} re-pinned)` : "none", p.drifted ? "bad" : "");
    $("power-note").textContent = [p.note, p.last_error, p.reboot_required ? "reboot required to reach the mode" : ""]
      .filter(Boolean).join(" · ");
  } else {
    set("power-board", "–");
    set("power-mode", "unknown", "muted");
    set("power-pinned", "–");
    set("power-drift", "–");
    $("power-note").textContent = "The power watch is not running.";
  }

  // Machine
  const m = s.machine;
  let hottest = null, watts = null;
  if (m) {
    set("m-cpu", m.cpu.ok ? `${num(m.cpu.busy_percent, 0)}% of ${m.cpu.cores} cores` : "n/a");
    set("m-load", m.load.ok ? `${num(m.load.load1, 2)} ${num(m.load.load5, 2)} ${num(m.load.load15, 2)}` : "n/a");
    set("m-mem", m.memory.ok ? `${bytes(m.memory.used_bytes)} of ${bytes(m.memory.total_bytes)} (${num(m.memory.used_percent, 0)}%)` : "n/a");
    set("power-gpu", m.gpu.ok ? `${num(m.gpu.cur_hz / 1e6, 0)} MHz (max ${num(m.gpu.max_hz / 1e6, 0)})` +
      (m.gpu.load_ok ? ` · ${num(m.gpu.load_percent, 0)}% busy` : "") : "n/a");
    const zones = (m.thermal || []).filter((z) => z.ok);
    zones.forEach((z) => { if (hottest == null || z.celsius > hottest.celsius) hottest = z; });
    set("m-temp", hottest ? `${num(hottest.celsius, 1)} °C (${hottest.type})` : "n/a",
      hottest && hottest.celsius >= 85 ? "bad" : hottest && hottest.celsius >= 70 ? "warn" : "");
    rows($("m-temps"), ["Zone", "°C"], zones.map((z) => [z.type || z.zone, num(z.celsius, 1)]));
    const rails = (m.rails || []).filter((r) => r.ok);
    if (rails.length) watts = rails.reduce((a, r) => a + r.milliwatts, 0) / 1000;
    set("power-draw", rails.length ? `${num(watts, 1)} W over ${rails.length} rails` : "n/a");
    rows($("m-rails"), ["Rail", "W"], rails.map((r) => [r.name, num(r.milliwatts / 1000, 2)]));
  }
  push(local.temp, hottest ? hottest.celsius : null);
  push(local.power, watts);

  // Model
  const mo = s.model;
  set("model-name", mo.name);
  set("model-file", mo.path || "–");
  set("model-arch", mo.arch || "–");
  set("model-quant", mo.quantization || "–");
  set("model-size", bytes(mo.file_bytes) + (mo.parameters ? ` · ${num(mo.parameters / 1e6, 2)} M parameters` : ""));
  set("model-mapped", bytes(mo.mapped_bytes));
  set("model-ctx", mo.context_length + " tokens");
  $("model-note").textContent = mo.note || "";

  // Device
  const dv = s.device;
  if (dv) {
    const gpu = dv.engine !== "cpu";
    set("dev-engine", !gpu ? "CPU" : dv.kind === "CPU" ? "Vulkan on the CPU (lavapipe)" : "GPU (Vulkan)");
    set("dev-name", dv.name + (dv.kind ? " · " + dv.kind : "") + (dv.api ? " · Vulkan " + dv.api : ""));
    set("dev-driver", (dv.driver || "–") + (dv.gpu_matmul ? " · matrix products on " +
      (dv.gpu_matmul === "coopmat" ? `tensor cores (${dv.gpu_matmul_tiles})` : "the scalar shaders") : ""));
    set("dev-mem", gpu ? `${bytes(dv.memory_used_bytes)} of ${bytes(dv.memory_total_bytes)}` : "the machine's (see Machine)");
    set("dev-sel", "model.device: " + dv.selector);
    $("dev-note").textContent = dv.note || "";
  } else {
    set("dev-engine", "–");
    $("dev-note").textContent = "";
  }

  // Cache
  const c = s.cache;
  set("cache-entries", String(c.entries) + (c.enabled ? "" : " (off: cache.max_bytes is 0)"));
  set("cache-ram", `${bytes(c.ram_bytes)} of ${bytes(c.max_bytes)}`);
  set("cache-disk", `${bytes(c.disk_bytes)} of ${bytes(c.max_disk_bytes)} (${c.disk_entries} entries)`);
  set("cache-restored", c.restoring ? `restoring… ${c.restored_entries} entries so far` :
    `${c.restored_entries} entries in ${num(c.restore_seconds, 2)} s` + (c.skipped_records ? `, ${c.skipped_records} damaged records skipped` : ""),
    c.skipped_records ? "warn" : "");
  set("cache-hit", `${num(c.hit_ratio * 100, 1)}% (${c.hit_tokens} of ${c.queried_tokens} tokens)`);
  set("cache-persist", !c.persist ? "no"
    : c.persist_failing ? "FAILING: " + (c.persist_error || "write error") + " (" + (c.dropped_writes || 0) + " snapshots not written)"
    : "yes" + (c.dir ? ", in " + c.dir : "") + (c.dropped_writes ? " · " + c.dropped_writes + " not written" : ""));

  // Speculative decoding
  const sp = s.speculative;
  set("spec-mode", sp.mode);
  set("spec-params", `steps ${sp.steps} · top-k ${sp.top_k} · verify ${sp.verify_nodes} nodes · ` +
    (sp.drafters.length ? sp.drafters.join(", ") : "no drafters"));
  set("spec-accept", sp.draft_tokens ? `${num(sp.acceptance * 100, 1)}% (${sp.accepted_tokens} of ${sp.draft_tokens}); ${num(sp.mean_accepted_length, 2)} tokens per verify step` : "no drafts yet");
  const rl = sp.last_reload;
  const restart = rl && rl.restart_required && rl.restart_required.length ? "; restart required for " + rl.restart_required.join(", ") : "";
  set("spec-reload", rl ? ago(rl.at) + (rl.error ? ": refused" : (rl.applied && rl.applied.length ? ": " + rl.applied.join(", ") : ": no change")) + restart : "none since start",
    rl && rl.error ? "bad" : (restart ? "warn" : ""));
  const se = $("spec-error");
  se.hidden = !(rl && rl.error);
  se.textContent = rl && rl.error ? "Config error (the running config stays in force): " + rl.error : "";

  // Requests
  const r = s.requests;
  set("req-running", String(r.running));
  set("req-waiting", String(r.waiting));
  set("req-ttft", `${ms(r.ttft_p50_ms)} / ${ms(r.ttft_p90_ms)}`);
  set("req-tpot", `${ms(r.tpot_p50_ms)} / ${ms(r.tpot_p90_ms)}`);
  set("req-toks", num(r.tokens_per_second, 1));
  set("req-total", `${r.total} / ${r.failed}`, r.failed ? "warn" : "");
  push(local.queue, r.running + r.waiting);
  const series = r.series || [];
  chart("chart-toks", series.map((p) => p.tokens_per_second));
  chart("chart-ttft", series.map((p) => (p.requests ? p.ttft_p50_ms : null)));
  chart("chart-tpot", series.map((p) => (p.requests ? p.tpot_p50_ms : null)));
  chart("chart-queue", local.queue);
  chart("chart-temp", local.temp);
  chart("chart-power", local.power);

  // Sequences in flight, and the memory their states hold
  const mem = s.memory;
  $("seq-mem").textContent = mem ? `State memory ${bytes(mem.in_use_bytes)} of ${mem.budget_bytes > 0 ? bytes(mem.budget_bytes) : "no bound"}` +
    (mem.waiting_for_memory ? `, ${mem.waiting_for_memory} waiting for memory` : "") : "";
  const seqs = s.sequences || [];
  $("seqs-none").hidden = seqs.length > 0;
  const st = $("seqs-table");
  st.hidden = seqs.length === 0;
  const sb = st.tBodies[0];
  sb.innerHTML = "";
  seqs.forEach((q) => {
    const row = sb.insertRow();
    [q.request_id, q.state, String(q.prompt_tokens), String(q.tokens), q.ttft_ms ? ms(q.ttft_ms) : "–",
      q.tokens_per_second ? num(q.tokens_per_second, 1) : "–", num(q.elapsed_seconds, 1) + " s"]
      .forEach((v) => { row.insertCell().textContent = v; });
  });

  // Errors
  const errs = s.errors || [];
  $("errors-none").hidden = errs.length > 0;
  const table = $("errors-table");
  table.hidden = errs.length === 0;
  const body = table.tBodies[0];
  body.innerHTML = "";
  errs.forEach((e) => {
    const row = body.insertRow();
    [new Date(e.time).toLocaleTimeString(), String(e.status), e.method + " " + e.path, e.message]
      .forEach((c) => { row.insertCell().textContent = c; });
  });
}

async function poll() {
  try {
    // With api.key set, the cookie that /?key=KEY set goes with this fetch.
    const res = await fetch("/status.json", { cache: "no-store" });
    if (res.status === 401) throw new Error("the API key is needed: open this page as /?key=KEY");
    if (!res.ok) throw new Error("HTTP " + res.status);
    render(await res.json());
    set("conn", "live", "pill good");
    document.body.dataset.loaded = "1";
  } catch (e) {
    set("conn", "offline: " + e.message, "pill bad");
  } finally {
    setTimeout(poll, POLL_MS);
  }
}
poll();
