#!/usr/bin/python3
"""Writes the chat requests that the render goldens are made from.

Usage: mkrequests.py AGENTIC_JSONL OUTDIR

Conversations are rebuilt from the MLPerf Edge Agentic trace the way its replay
client sends them (system + user from the first row, recorded assistant rows with
content null, reasoning_content and tool_calls whose arguments are JSON strings,
one tool message per tool result). Edge cases are written by hand below.
Output: OUTDIR/NAME.request.json in render.py's request format, keys in the order
a client would send them.
"""
import json
import os
import sys


def conversation(rows, conv_id, nrows):
    """The first nrows rows of one conversation as OpenAI messages, plus its tools."""
    conv = [r for r in rows if r["conversation_id"] == conv_id]
    conv.sort(key=lambda r: r["turn"])
    messages, tools = [], None
    for r in conv[:nrows]:
        if r["role"] == "user":
            if r.get("system"):
                messages.append({"role": "system", "content": r["system"]})
            messages.append({"role": "user", "content": r["content"]})
            if r.get("tools"):
                tools = r["tools"]
        elif r["role"] == "assistant":
            m = {"role": "assistant", "content": r.get("content")}
            if r.get("reasoning_content") is not None:
                m["reasoning_content"] = r["reasoning_content"]
            if r.get("tool_calls"):
                m["tool_calls"] = r["tool_calls"]
            messages.append(m)
        elif r["role"] == "tool":
            for res in r["tool_results"]:
                messages.append({"role": "tool", "tool_call_id": res["tool_call_id"], "content": res["content"]})
    return messages, tools


def request(messages, tools, add_generation_prompt=True, kwargs=None):
    req = {"messages": messages}
    if tools is not None:
        req["tools"] = tools
    req["add_generation_prompt"] = add_generation_prompt
    if kwargs is not None:
        req["kwargs"] = kwargs
    return req


# A tool list with non-ASCII text, a nested schema whose keys are not in
# alphabetical order, numbers Python prints in its own way, and strings that
# need escaping (quotes, backslashes, control characters, HTML-ish characters).
EDGE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "météo_lookup",
            "description": "Donne la météo d'une ville — 天気を調べる 🌦️. Quotes \"here\", a back\\slash, a tab\there, <b>&amp;</b>, line\u2028separator.",
            "parameters": {
                "type": "object",
                "required": ["ville", "unités"],
                "properties": {
                    "ville": {"type": "string", "description": "Nom de la ville (ex. Zürich, 東京)"},
                    "unités": {"enum": ["°C", "°F"], "type": "string", "default": "°C"},
                    "jours": {"type": "integer", "minimum": 1, "maximum": 16, "default": 3},
                    "seuil": {"type": "number", "default": 0.5, "multipleOf": 1e-05, "maximum": 1e+21, "minimum": -2.0},
                    "options": {
                        "type": "object",
                        "properties": {
                            "zeta": {"type": "boolean", "default": True},
                            "alpha": {"type": ["string", "null"], "default": None},
                            "détails": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+\\d*$"}},
                        },
                        "additionalProperties": False,
                    },
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_query",
            "parameters": {
                "properties": {
                    "sql": {"description": "A SQL query\nover several lines", "type": "string"},
                    "limit": {"type": "integer"},
                    "dry_run": {"type": "boolean"},
                    "params": {"type": "object"},
                    "columns": {"type": "array", "items": {"type": "string"}},
                    "ratio": {"type": "number"},
                },
                "type": "object",
                "required": ["sql"],
            },
        },
    },
]


def edge_cases():
    out = {}
    out["edge_nonascii_tools"] = request(
        [
            {"role": "system", "content": "Tu es un assistant météo. Réponds en français."},
            {"role": "user", "content": "Quel temps fera-t-il à Zürich demain ? 天気は？"},
        ],
        EDGE_TOOLS,
        kwargs={"enable_thinking": False},
    )
    out["edge_tool_arg_types"] = request(
        [
            {"role": "user", "content": "Count the orders from last week, grouped by région."},
            {
                "role": "assistant",
                "content": "Let me query the database.",
                "reasoning_content": "\nI should run a SQL query.\n",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "run_query",
                            "arguments": json.dumps(
                                {
                                    "sql": "SELECT région, count(*)\nFROM orders\nWHERE ts > now() - '7 days'",
                                    "limit": 100,
                                    "dry_run": False,
                                    "params": {"z": 1, "a": [1, 2.5, None, True], "ü": "ß"},
                                    "columns": ["région", "n"],
                                    "ratio": 0.25,
                                },
                                ensure_ascii=False,
                            ),
                        },
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "météo_lookup", "arguments": "{\"ville\": \"Zürich\", \"unités\": \"°C\", \"jours\": 2}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "[{\"région\": \"Nord\", \"n\": 12}]"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Ensoleillé, 21 °C"},
        ],
        EDGE_TOOLS,
        kwargs={"enable_thinking": True},
    )
    out["edge_tool_arg_scalars"] = request(
        [
            {"role": "system", "content": "You run queries."},
            {"role": "user", "content": "Dry-run it."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "run_query", "arguments": "{\"sql\": \"SELECT 1\", \"dry_run\": true, \"limit\": null, \"ratio\": 2.50, \"columns\": [], \"params\": {}}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_9", "content": "ok"},
        ],
        EDGE_TOOLS,
        kwargs={"enable_thinking": False},
    )
    out["edge_no_tools"] = request(
        [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "Say hi."},
            {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": "Again, in Greek: γεια"},
        ],
        None,
        kwargs={"enable_thinking": False},
    )
    out["edge_think_in_content"] = request(
        [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "<think>\nSimple sum.\n</think>\n\n4"},
            {"role": "user", "content": "And 3+3?"},
            {"role": "assistant", "content": "Adding again.</think>6"},
            {"role": "user", "content": "Thanks"},
        ],
        [],
    )
    out["edge_history_last_assistant"] = request(
        [
            {"role": "user", "content": "List the files."},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Use ls.",
                "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls -la\"}"}}],
            },
        ],
        [{"type": "function", "function": {"name": "bash", "description": "Execute a bash command", "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The bash command to execute"}}, "required": ["command"]}}}],
        add_generation_prompt=False,
    )
    return out


# Requests whose messages carry content as an array of text parts. render.py
# passes such content to the template untouched (as transformers does); servers
# join the text parts with "\n" first (vLLM, llama.cpp). The golden of NAME is
# rendered from NAME.joined.json, the same request with the parts joined.
def parts_cases():
    req = request(
        [
            {"role": "system", "content": [{"type": "text", "text": "You are helpful."}, {"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "First part."}, {"type": "text", "text": "Second part — ünïcode."}]},
        ],
        None,
        kwargs={"enable_thinking": False},
    )
    return {"edge_text_parts": req}


def join_parts(req):
    req = json.loads(json.dumps(req))
    for m in req["messages"]:
        if isinstance(m.get("content"), list):
            m["content"] = "\n".join(p["text"] for p in m["content"] if p.get("type") == "text")
    return req


# (name, conversation, rows, add_generation_prompt, kwargs)
CONVERSATIONS = [
    ("mlperf_django16899_t1_nothink", "django__django-16899", 1, True, {"enable_thinking": False}),
    ("mlperf_django16899_t5_nothink", "django__django-16899", 5, True, {"enable_thinking": False}),
    ("mlperf_astropy7671_t3_parallel_nothink", "astropy__astropy-7671", 3, True, {"enable_thinking": False}),
    ("mlperf_flask5014_t5_parallel_think", "pallets__flask-5014", 5, True, {"enable_thinking": True}),
    ("mlperf_sympy12096_t7_default", "sympy__sympy-12096", 7, True, None),
    ("mlperf_requests1921_t3_think", "psf__requests-1921", 3, True, {"enable_thinking": True}),
    ("mlperf_pytest6202_t9_nothink", "pytest-dev__pytest-6202", 9, True, {"enable_thinking": False}),
]


def main():
    rows = [json.loads(line) for line in open(sys.argv[1])]
    outdir = sys.argv[2]
    reqs = {}
    for name, conv, n, agp, kwargs in CONVERSATIONS:
        messages, tools = conversation(rows, conv, n)
        reqs[name] = request(messages, tools, agp, kwargs)
    reqs.update(edge_cases())
    for name, req in reqs.items():
        with open(os.path.join(outdir, name + ".request.json"), "w") as f:
            json.dump(req, f, ensure_ascii=False, indent=1)
            f.write("\n")
    for name, req in parts_cases().items():
        with open(os.path.join(outdir, name + ".request.json"), "w") as f:
            json.dump(req, f, ensure_ascii=False, indent=1)
            f.write("\n")
        with open(os.path.join(outdir, name + ".joined.json"), "w") as f:
            json.dump(join_parts(req), f, ensure_ascii=False, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
