#!/usr/bin/env bash
# dashboard-check: the Grafana dashboard (packaging/fleet/grafana/
# edgellmd-fleet.json) against live daemons (make dashboard-check).
#
#   1. two edgellmd daemons on 127.0.0.1 (ports the kernel picks), each
#      reading a Jetson's sysfs (power/testdata/root/thor-agx/sys/class
#      bound over /sys/class in a mount namespace of their own, as root)
#      so that the temperature and power panels have series, unless this
#      machine has thermal zones of its own;
#   2. a few completions and chats on each (repeated prompts: cache hits);
#   3. /metrics scraped from each: `promtool check metrics` (Debian's
#      prometheus package) must pass, and every metric name a panel or a
#      template variable selects must be in each scrape
#      (scripts/dashboard-check.py parses the names out of the PromQL);
#      a copy of the dashboard with one name misspelt must fail that check;
#   4. Debian's Prometheus scraping both daemons every second with
#      packaging/fleet/grafana/prometheus.yml (the boxes templated; the file
#      passes promtool check config) while requests go on: every panel's expression, with $instance each box
#      and then both, must parse and return data.
#
# Prometheus and promtool come from Debian's prometheus package, unpacked
# under bin/prometheus-root (apt-get download; nothing installed, no
# service started); PROMETHEUS_ROOT names another unpacked tree. Needs Go,
# python3, curl, and root or a machine with /sys/class/thermal zones.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DASH=${DASHBOARD:-packaging/fleet/grafana/edgellmd-fleet.json}
PROMROOT=${PROMETHEUS_ROOT:-bin/prometheus-root}

die() {
	echo "dashboard-check: $*" >&2
	exit 1
}
for t in python3 curl; do command -v "$t" >/dev/null || die "$t not found"; done

if [ ! -x "$PROMROOT/usr/bin/prometheus" ] || [ ! -x "$PROMROOT/usr/bin/promtool" ]; then
	command -v apt-get >/dev/null || die "no $PROMROOT/usr/bin/prometheus, and no apt-get to fetch Debian's prometheus package (set PROMETHEUS_ROOT)"
	d=$(mktemp -d)
	chmod 0755 "$d"
	(cd "$d" && apt-get download prometheus >/dev/null 2>&1) || {
		rm -rf "$d"
		die "apt-get download prometheus failed (apt-get update first?)"
	}
	rm -rf "$PROMROOT"
	mkdir -p "$PROMROOT"
	dpkg-deb -x "$d"/prometheus_*.deb "$PROMROOT"
	echo "dashboard-check: unpacked $(basename "$d"/prometheus_*.deb) into $PROMROOT"
	rm -rf "$d"
fi
PROMETHEUS=$PROMROOT/usr/bin/prometheus
PROMTOOL=$PROMROOT/usr/bin/promtool

WORK=$(mktemp -d /tmp/dashboard-check.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# Where the daemons read /sys/class from.
if ls /sys/class/thermal/thermal_zone* >/dev/null 2>&1; then
	SYSFS=""
	echo "dashboard-check: this machine's /sys/class (it has thermal zones)"
elif [ "$(id -u)" = 0 ] && unshare --mount true 2>/dev/null; then
	SYSFS=$ROOT/power/testdata/root/thor-agx/sys/class
	echo "dashboard-check: the daemons read a Jetson Thor's /sys/class ($SYSFS, bound in a mount namespace)"
else
	die "this machine has no thermal zones: run as root (the daemons then read power/testdata's Jetson sysfs tree in a mount namespace) or on a Jetson"
fi

echo "dashboard-check: building edgellmd"
CGO_ENABLED=0 "${GO:-go}" build -o "$WORK/edgellmd" ./cmd/edgellmd

# start_box N: daemon N on 127.0.0.1:0; sets PORT_N from its log.
PORTS=()
start_box() {
	local n=$1 dir="$WORK/box$1"
	mkdir -p "$dir/cache"
	printf 'listen: 127.0.0.1:0\ncache:\n  dir: %s/cache\n' "$dir" >"$dir/edgellmd.yaml"
	local cmd=("$WORK/edgellmd" serve -c "$dir/edgellmd.yaml" -m "$ROOT/testdata/models/stories260K.gguf")
	if [ -n "$SYSFS" ]; then
		# shellcheck disable=SC2016 # $0 and $@ are the inner shell's
		unshare --mount sh -c 'mount --bind "$0" /sys/class && exec "$@"' "$SYSFS" "${cmd[@]}" >"$dir/log" 2>&1 &
	else
		"${cmd[@]}" >"$dir/log" 2>&1 &
	fi
	PIDS+=($!)
	local port=""
	for _ in $(seq 100); do
		port=$(sed -n 's/.*"listen":\["http:\/\/127\.0\.0\.1:\([0-9]*\)".*/\1/p' "$dir/log" | head -n 1)
		[ -n "$port" ] && curl -sf -m 2 "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
		sleep 0.2
	done
	curl -sf -m 2 "http://127.0.0.1:$port/health" >/dev/null 2>&1 || {
		cat "$dir/log"
		die "box $n did not come up"
	}
	PORTS+=("$port")
}
start_box 1
start_box 2
echo "dashboard-check: boxes on 127.0.0.1:${PORTS[0]} and 127.0.0.1:${PORTS[1]}"

PROMPT="Once upon a time, there was a little dog named Max who liked to run in the park with his friends. One day, Max saw a big red ball under a tree and he wanted to play with it. He ran to the ball and"
traffic() { # traffic ROUNDS: a completion and a chat to each box per round
	local r port
	for r in $(seq "$1"); do
		for port in "${PORTS[@]}"; do
			curl -sf -m 30 -H 'content-type: application/json' \
				-d "{\"prompt\":\"$PROMPT\",\"max_tokens\":4}" "http://127.0.0.1:$port/v1/completions" >/dev/null
			curl -sf -m 30 -H 'content-type: application/json' \
				-d "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story about Max, round $r.\"}],\"max_tokens\":4}" \
				"http://127.0.0.1:$port/v1/chat/completions" >/dev/null
		done
	done
}
traffic 2

fails=0
scrapes=()
for i in 0 1; do
	f=$WORK/scrape$((i + 1)).txt
	curl -sf -m 10 "http://127.0.0.1:${PORTS[$i]}/metrics" >"$f"
	scrapes+=(--scrape "$f")
	if "$PROMTOOL" check metrics <"$f" >"$WORK/promtool.out" 2>&1; then
		echo "ok    promtool check metrics: box $((i + 1))'s scrape ($(grep -vc '^#' "$f") samples; $("$PROMTOOL" --version 2>&1 | head -n 1 | cut -d' ' -f1-3))"
	else
		echo "FAIL  promtool check metrics: box $((i + 1))'s scrape"
		sed 's/^/      /' "$WORK/promtool.out"
		fails=$((fails + 1))
	fi
done
for m in edgellmd_temperature_celsius edgellmd_power_rail_watts; do
	if ! grep -q "^$m{" "$WORK/scrape1.txt"; then
		echo "FAIL  the scrape has no $m (the sysfs tree was not read)"
		fails=$((fails + 1))
	fi
done

if ! python3 scripts/dashboard-check.py "$DASH" "${scrapes[@]}"; then fails=$((fails + 1)); fi
# The check can fail: one name misspelt.
sed 's/edgellmd_prefix_cache_hits_total/edgellmd_prefix_cache_hit_total/' "$DASH" >"$WORK/misspelt.json"
if python3 scripts/dashboard-check.py "$WORK/misspelt.json" "${scrapes[@]}" >"$WORK/misspelt.out" 2>&1; then
	echo "FAIL  a dashboard with edgellmd_prefix_cache_hit_total (misspelt) passed the check"
	fails=$((fails + 1))
elif grep -q 'edgellmd_prefix_cache_hit_total is not in the scrape' "$WORK/misspelt.out"; then
	echo "ok    a dashboard with edgellmd_prefix_cache_hit_total (misspelt) fails the check"
else
	echo "FAIL  the misspelt dashboard failed for another reason:"
	sed 's/^/      /' "$WORK/misspelt.out"
	fails=$((fails + 1))
fi

# Prometheus scraping both boxes.
PPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The shipped scrape config, with these boxes and a 1 s interval.
awk -v a="127.0.0.1:${PORTS[0]}" -v b="127.0.0.1:${PORTS[1]}" '
	/^[ \t]*# fleet: boxes$/ { n++; print; if (n == 1) { print "          - \"" a "\""; print "          - \"" b "\"" }; next }
	n == 1 { next }
	{ sub(/_interval: 15s/, "_interval: 1s"); print }' packaging/fleet/grafana/prometheus.yml >"$WORK/prometheus.yml"
"$PROMTOOL" check config "$WORK/prometheus.yml" >/dev/null
if "$PROMTOOL" check config packaging/fleet/grafana/prometheus.yml >"$WORK/promtool.out" 2>&1; then
	echo "ok    promtool check config packaging/fleet/grafana/prometheus.yml"
else
	echo "FAIL  promtool check config packaging/fleet/grafana/prometheus.yml"
	sed 's/^/      /' "$WORK/promtool.out"
	fails=$((fails + 1))
fi
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
	--web.listen-address="127.0.0.1:$PPORT" >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
PROM=http://127.0.0.1:$PPORT
up=0
for _ in $(seq 150); do
	up=$(curl -sf -m 2 "$PROM/api/v1/query?query=sum(up)" 2>/dev/null | sed -n 's/.*"value":\[[0-9.]*,"\([0-9]*\)".*/\1/p' || true)
	[ "${up:-0}" = 2 ] && break
	sleep 0.2
done
if [ "${up:-0}" != 2 ]; then
	tail -20 "$WORK/prometheus.log"
	die "Prometheus did not scrape both boxes"
fi
echo "ok    Prometheus ($("$PROMETHEUS" --version 2>&1 | head -n 1 | cut -d' ' -f1-3)) scrapes both boxes"
# Requests for a while, so that each rate() window holds increases.
traffic 6
sleep 2
if ! python3 scripts/dashboard-check.py "$DASH" --prom "$PROM" \
	--instance "127.0.0.1:${PORTS[0]}" --instance "127.0.0.1:${PORTS[1]}"; then
	fails=$((fails + 1))
fi

if [ "$fails" -ne 0 ]; then
	echo "dashboard-check: $fails check(s) failed"
	exit 1
fi
echo "dashboard-check: all checks passed"
