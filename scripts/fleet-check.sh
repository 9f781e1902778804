#!/usr/bin/env bash
# fleet-check: three edgellmd daemons on 127.0.0.1 behind a real nginx
# running packaging/fleet/nginx.conf (ports templated), the MLPerf agentic
# trace replayed through it with `edgellmd bench agentic --url`:
#   1. one box alone (the reference figure),
#   2. three boxes, affinity (hash on the session key, the file as it is),
#   3. three boxes, round robin (the file without its hash line),
#   4. three boxes, affinity, one daemon killed mid-replay.
# Prints the prompt tokens served from cache for 1-3 and, for 4, the
# requests that failed. Fails when affinity keeps less than 95% of the
# single box's cached tokens, or a request fails that was not on the
# killed box. Needs nginx (Debian's nginx or nginx-light) and python3.
#
#   make fleet-check
#   FLEET_CONVERSATIONS=8 FLEET_TURNS=10 scripts/fleet-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CONVS=${FLEET_CONVERSATIONS:-9}
TURNS=${FLEET_TURNS:-8}
MAXTOK=${FLEET_MAX_TOKENS:-8}
PORT0=${FLEET_PORT_BASE:-18300} # boxes on PORT0+1..3, nginx on PORT0
TRACE=${FLEET_TRACE:-$ROOT/../shared/data/mlperf-edge-agentic/agentic_coding_2.5h.jsonl}
[ -f "$TRACE" ] || TRACE=$ROOT/bench/testdata/agentic_coding_2.5h.jsonl

if ! command -v nginx >/dev/null; then
	if [ "$(id -u)" = 0 ]; then
		apt-get -o DPkg::Lock::Timeout=120 install -y nginx-light >/dev/null 2>&1 ||
			apt-get -o DPkg::Lock::Timeout=120 install -y nginx >/dev/null
	else
		echo "fleet-check: nginx is missing: apt-get install nginx-light (or nginx)" >&2
		exit 1
	fi
fi
NGINX=$(command -v nginx)

WORK=$(mktemp -d /tmp/fleet-check.XXXXXX)
PIDS=()
NGINX_UP=0
cleanup() {
	if [ "$NGINX_UP" = 1 ]; then
		"$NGINX" -p "$WORK" -c "$WORK/nginx-main.conf" -s stop 2>/dev/null || true
	fi
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

echo "fleet-check: building edgellmd and a synthetic qwen35 (Qwen3 tokenizer and template) in $WORK"
CGO_ENABLED=0 "${GO:-go}" build -o "$WORK/edgellmd" ./cmd/edgellmd
BIN=$WORK/edgellmd
MODEL=$WORK/small.gguf
"$BIN" synth --arch qwen35 --size small --tokenizer engine/tokenizer/testdata/qwen3/tokenizer.json.gz --seed 1 -o "$MODEL" >/dev/null

# start_box N RUN: daemon N (port PORT0+N) with a fresh cache of its own.
start_box() {
	local n=$1 dir="$WORK/$2/box$1"
	mkdir -p "$dir"
	printf 'cache:\n  dir: %s/cache\nupdate:\n  state_dir: %s/state\n' "$dir" "$dir" >"$dir/edgellmd.yaml"
	"$BIN" serve -c "$dir/edgellmd.yaml" -m "$MODEL" --listen "127.0.0.1:$((PORT0 + n))" --log-level warn >"$dir/log" 2>&1 &
	PIDS+=($!)
	BOX_PID[n]=$!
	for _ in $(seq 1 120); do
		curl -sf "http://127.0.0.1:$((PORT0 + n))/health" >/dev/null && return 0
		sleep 0.5
	done
	echo "fleet-check: box $n not healthy after 60 s" >&2
	cat "$dir/log" >&2
	return 1
}
declare -a BOX_PID
stop_boxes() {
	local n
	for n in "${!BOX_PID[@]}"; do
		kill "${BOX_PID[$n]}" 2>/dev/null || true
		wait "${BOX_PID[$n]}" 2>/dev/null || true
	done
	BOX_PID=()
}

# start_nginx MODE: the packaged file, its boxes and port templated;
# MODE rr drops the hash line (nginx's default, round robin).
start_nginx() {
	local mode=$1
	sed -e '/# fleet: boxes begin/,/# fleet: boxes end/c\
    server 127.0.0.1:'$((PORT0 + 1))' max_fails=2 fail_timeout=10s;\
    server 127.0.0.1:'$((PORT0 + 2))' max_fails=2 fail_timeout=10s;\
    server 127.0.0.1:'$((PORT0 + 3))' max_fails=2 fail_timeout=10s;' \
		-e "s/^    listen 8000;/    listen 127.0.0.1:$PORT0;/" \
		-e "s#/var/log/nginx/edgellmd-fleet.log#$WORK/access-$mode.log#" \
		packaging/fleet/nginx.conf >"$WORK/site.conf"
	if [ "$mode" = rr ]; then
		sed -i '/^    hash /d' "$WORK/site.conf"
	fi
	cat >"$WORK/nginx-main.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 256; }
http {
    client_body_temp_path $WORK/body; proxy_temp_path $WORK/proxy;
    fastcgi_temp_path $WORK/fcgi; uwsgi_temp_path $WORK/uwsgi; scgi_temp_path $WORK/scgi;
    include $WORK/site.conf;
}
CONF
	"$NGINX" -p "$WORK" -c "$WORK/nginx-main.conf" -t -q
	if [ "$NGINX_UP" = 1 ]; then
		"$NGINX" -p "$WORK" -c "$WORK/nginx-main.conf" -s stop 2>/dev/null
		for _ in $(seq 1 50); do [ -e "$WORK/nginx.pid" ] || break; sleep 0.1; done
	fi
	"$NGINX" -p "$WORK" -c "$WORK/nginx-main.conf"
	NGINX_UP=1
}

# replay URL NAME [more bench flags]: the trace through URL, summary in $WORK/NAME.
replay() {
	local url=$1 name=$2
	shift 2
	"$BIN" bench agentic --url "$url" --dataset "$TRACE" --tokenizer "$MODEL" \
		--conversations "$CONVS" --turns "$TURNS" --max-tokens "$MAXTOK" --turn-timeout 120s \
		--out "$WORK/$name" --json "$@" >"$WORK/$name.json" 2>"$WORK/$name.err" || true
}
cached() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["cached_prompt_tokens"], s["prompt_tokens"], s["completed_turns"], s["turns"])' "$1"; }

echo "fleet-check: $CONVS conversations x $TURNS turns of $(basename "$TRACE"), max_tokens $MAXTOK"

# 1. one box
start_box 1 single
replay "http://127.0.0.1:$((PORT0 + 1))" single
stop_boxes
read -r single_c single_p single_done single_all < <(cached "$WORK/single.json")

# 2. affinity
for n in 1 2 3; do start_box $n affinity; done
start_nginx hash
replay "http://127.0.0.1:$PORT0" affinity
stop_boxes
read -r aff_c aff_p aff_done aff_all < <(cached "$WORK/affinity.json")

# 3. round robin
for n in 1 2 3; do start_box $n rr; done
start_nginx rr
replay "http://127.0.0.1:$PORT0" rr
stop_boxes
read -r rr_c rr_p rr_done rr_all < <(cached "$WORK/rr.json")

# Each conversation's boxes under affinity (from nginx's log).
boxes_per_key=$(python3 - "$WORK/access-hash.log" <<'PY'
import re, sys, collections
seen = collections.defaultdict(set)
for line in open(sys.argv[1]):
    if "/v1/chat/completions" not in line:
        continue
    m = re.search(r'key="([^"]*)" upstream=(\S+)', line)
    if m:
        seen[m.group(1)].add(m.group(2))
print(max((len(v) for v in seen.values()), default=0), len(seen), len(set().union(*seen.values())) if seen else 0)
PY
)

# 4. affinity, the busiest box killed once a third of the requests are done,
#    conversations three at a time so that some are in flight.
for n in 1 2 3; do start_box $n kill; done
start_nginx kill
"$BIN" bench agentic --url "http://127.0.0.1:$PORT0" --dataset "$TRACE" --tokenizer "$MODEL" \
	--conversations "$CONVS" --turns "$TURNS" --max-tokens "$MAXTOK" --turn-timeout 120s \
	--concurrency 3 --out "$WORK/kill" --json >"$WORK/kill.json" 2>"$WORK/kill.err" &
bench_pid=$!
PIDS+=("$bench_pid")
target=$((CONVS * TURNS / 3))
for _ in $(seq 1 600); do
	done_n=$(grep -c 'POST /v1/chat/completions' "$WORK/access-kill.log" 2>/dev/null || true)
	[ "${done_n:-0}" -ge "$target" ] && break
	kill -0 $bench_pid 2>/dev/null || break
	sleep 0.1
done
# The box that served the most requests so far, so that conversations move.
victim=$(grep -o "upstream=127.0.0.1:[0-9]*" "$WORK/access-kill.log" | sort | uniq -c | sort -rn | head -1 | sed 's/.*://')
victim=$((victim - PORT0))
kill -9 "${BOX_PID[$victim]}"
wait "${BOX_PID[$victim]}" 2>/dev/null || true
unset "BOX_PID[$victim]"
killed_at=${done_n:-0}
wait $bench_pid || true
stop_boxes
read -r _ _ kill_done kill_all < <(cached "$WORK/kill.json")
read -r failed not_issued < <(python3 - "$WORK/kill/per_turn.jsonl" <<'PY'
import json, sys
failed = not_issued = 0
for line in open(sys.argv[1]):
    e = json.loads(line).get("error", "")
    if e.startswith("not issued"):
        not_issued += 1
    elif e:
        failed += 1
print(failed, not_issued)
PY
)
retried=$(grep -c "upstream=127.0.0.1:$((PORT0 + victim)), " "$WORK/access-kill.log" || true)
moved=$(python3 - "$WORK/access-kill.log" "127.0.0.1:$((PORT0 + victim))" <<'PY'
import re, sys
dead = sys.argv[2]
before, after = set(), set()
for line in open(sys.argv[1]):
    m = re.search(r'key="([^"]*)" upstream=(.*?) upstream_status', line)
    if not m or "/v1/chat/completions" not in line:
        continue
    ups = m.group(2).split(", ")
    if dead in ups[:-1] or (ups[-1] != dead and m.group(1) in before):
        after.add(m.group(1))
    if ups[-1] == dead:
        before.add(m.group(1))
print(len(before & after))
PY
)

pct() { python3 -c "import sys; a,b=int(sys.argv[1]),int(sys.argv[2]); print(f'{100*a/b:.1f}%' if b else 'n/a')" "$1" "$2"; }
echo
printf '%-28s %14s %14s %9s %s\n' run cached_tokens prompt_tokens turns "cached vs single box"
printf '%-28s %14s %14s %9s %s\n' "1 box" "$single_c" "$single_p" "$single_done/$single_all" 100%
printf '%-28s %14s %14s %9s %s\n' "3 boxes, affinity" "$aff_c" "$aff_p" "$aff_done/$aff_all" "$(pct "$aff_c" "$single_c")"
printf '%-28s %14s %14s %9s %s\n' "3 boxes, round robin" "$rr_c" "$rr_p" "$rr_done/$rr_all" "$(pct "$rr_c" "$single_c")"
read -r most_boxes n_keys n_boxes <<<"$boxes_per_key"
echo "affinity: $n_keys conversations over $n_boxes boxes, each on at most $most_boxes box(es)"
echo "box $victim killed after $killed_at requests: $kill_done/$kill_all turns completed, $failed failed, $not_issued not issued after a failure in their conversation; $moved conversations moved off it; $retried requests nginx sent on to another box after the dead one refused them"

status=0
if [ "$single_done" != "$single_all" ] || [ "$aff_done" != "$aff_all" ] || [ "$rr_done" != "$rr_all" ]; then
	echo "fleet-check: FAIL: a replay without a killed box did not complete every turn" >&2
	status=1
fi
if [ $((aff_c * 100)) -lt $((single_c * 95)) ]; then
	echo "fleet-check: FAIL: affinity kept $aff_c cached tokens, under 95% of the single box's $single_c" >&2
	status=1
fi
if [ "$failed" -gt 3 ]; then # at most one in flight per conversation, three at a time
	echo "fleet-check: FAIL: $failed requests failed, more than were in flight on the killed box" >&2
	status=1
fi
if [ $status != 0 ]; then
	echo "fleet-check: logs, summaries and nginx's access logs kept in $WORK" >&2
	trap - EXIT
	"$NGINX" -p "$WORK" -c "$WORK/nginx-main.conf" -s stop 2>/dev/null || true
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	exit 1
fi
echo "fleet-check: ok"
