#!/bin/sh
# Regenerates every golden under engine/chat/testdata from shared/ with the
# reference renderer (Jinja2 with transformers' settings).
# Needs Debian's python3-jinja2. Run from engine/chat/testdata:
#   sh gen/make.sh /work/shared
set -eu
SHARED=${1:?usage: make.sh SHARED_DIR}
TRACE=$SHARED/data/mlperf-edge-agentic/agentic_coding_2.5h.jsonl
RENDER=$SHARED/tools/chatref/render.py

# Qwen3.5's template in the tokenizer_config.json form render.py reads.
/usr/bin/python3 -c "import json; json.dump({'chat_template': open('qwen35/chat_template.jinja').read(), 'eos_token': '<|im_end|>', 'bos_token': None}, open('qwen35/tokenizer_config.json', 'w'), ensure_ascii=False, indent=2)"

# Render goldens: render/NAME.request.json -> render/NAME.{qwen3,qwen35}.txt
python3 gen/mkrequests.py "$TRACE" render
for req in render/*.request.json; do
	name=${req%.request.json}
	src=$req
	[ -f "$name.joined.json" ] && src=$name.joined.json
	for model in qwen3 qwen35; do
		/usr/bin/python3 "$RENDER" $model/tokenizer_config.json < "$src" > "$name.$model.txt"
	done
done

# One-feature Jinja cases and strftime.
/usr/bin/python3 gen/mkjinja.py "$RENDER" .

# Recorded tool calls in the markup each model emits.
/usr/bin/python3 gen/mktoolcalls.py "$RENDER" "$TRACE" qwen3/tokenizer_config.json qwen35/tokenizer_config.json toolcalls
