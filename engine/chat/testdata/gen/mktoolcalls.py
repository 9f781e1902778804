#!/usr/bin/python3
"""Writes toolcalls/*.jsonl: assistant outputs as the model emits them, made by
rendering the MLPerf trace's recorded assistant messages (reasoning_content +
tool_calls) with the model's own template through the reference renderer,
each with the message the parser must recover from it.

Usage: mktoolcalls.py RENDER_PY AGENTIC_JSONL QWEN3_CONFIG QWEN35_CONFIG OUT_DIR

qwen3.jsonl  - Qwen3 template, JSON tool calls. Thinking on: the prompt ends
               with "<|im_start|>assistant\\n", so the output starts "<think>\\n".
qwen35.jsonl - Qwen3.5 template, XML tool calls. The prompt ends with
               "<|im_start|>assistant\\n<think>\\n", so the output starts inside
               the reasoning (start_in_reasoning).
Every file also holds, for some rows, the thinking-off form (the output after
"</think>\\n\\n", no reasoning).
"""
import importlib.util
import json
import os
import random
import sys

spec = importlib.util.spec_from_file_location("render", sys.argv[1])
render = importlib.util.module_from_spec(spec)
spec.loader.exec_module(render)

rows = [json.loads(line) for line in open(sys.argv[2])]
templates = {"qwen3": json.load(open(sys.argv[3]))["chat_template"],
             "qwen35": json.load(open(sys.argv[4]))["chat_template"]}
out_dir = sys.argv[5]

tools_by_conv = {r["conversation_id"]: r["tools"] for r in rows if r["role"] == "user"}
assistant = [r for r in rows if r["role"] == "assistant"]

# All rows with parallel calls, the three longest reasoning texts, and a fixed
# random sample of the rest.
rng = random.Random(20260101)
multi = [r for r in assistant if len(r["tool_calls"]) > 1]
longest = sorted(assistant, key=lambda r: -len(r.get("reasoning_content") or ""))[:3]
chosen_ids = {id(r) for r in multi + longest}
rest = [r for r in assistant if id(r) not in chosen_ids]
sample = multi + longest + rng.sample(rest, 50)
sample.sort(key=lambda r: (r["conversation_id"], r["turn"]))

START = "<|im_start|>assistant\n"
END = "<|im_end|>\n"


def emitted(template, row):
    msg = {"role": "assistant", "content": None,
           "reasoning_content": row.get("reasoning_content"),
           "tool_calls": json.loads(json.dumps(row["tool_calls"]))}
    text = render.render(template, [{"role": "user", "content": "go"}, msg], tools_by_conv[row["conversation_id"]], False)
    i = text.rindex(START) + len(START)
    assert text.endswith(END), text[-40:]
    return text[i:-len(END)]


for model, template in templates.items():
    with open(os.path.join(out_dir, model + ".jsonl"), "w") as f:
        for n, row in enumerate(sample):
            text = emitted(template, row)
            start_in_reasoning = False
            if model == "qwen35":
                assert text.startswith("<think>\n")
                text = text[len("<think>\n"):]
                start_in_reasoning = True
            want = {"content": "", "reasoning_content": (row.get("reasoning_content") or "").strip(),
                    "tool_calls": [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in row["tool_calls"]]}
            rec = {"id": "%s:%d" % (row["conversation_id"], row["turn"]), "tools": tools_by_conv[row["conversation_id"]],
                   "start_in_reasoning": start_in_reasoning, "text": text, "want": want}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            if n % 4 == 0:
                # Thinking off: the prompt ended with "<think>\n\n</think>\n\n".
                off = text.split("</think>", 1)[1].lstrip("\n")
                rec = dict(rec, id=rec["id"] + ":nothink", start_in_reasoning=False, text=off,
                           want=dict(want, reasoning_content=""))
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
