#!/usr/bin/python3
"""Runs the MLCommons endpoints harness's own bash-action extractor
(AgenticInferenceInlineScorer._bash_actions in
src/inference_endpoint/evaluation/scoring.py) over commands.json and over
every assistant row of ../agentic_coding_2.5h.jsonl, and writes
harness_actions.jsonl. The harness's source is read from a checkout given as
argv[1]; nothing of it is copied here.

Usage: make_harness_actions.py ENDPOINTS_CHECKOUT > harness_actions.jsonl
"""
import ast, json, re, sys
from pathlib import Path
from typing import ClassVar, Any

src = (Path(sys.argv[1]) / "src/inference_endpoint/evaluation/scoring.py").read_text()
tree = ast.parse(src)
cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AgenticInferenceInlineScorer")
keep = [n for n in cls.body
        if (isinstance(n, ast.AnnAssign) and n.target.id in
            ("_EXECUTABLE_ALIASES", "_SHELL_WRAPPERS", "_COMMAND_SEPARATOR_RE", "_QUOTED_RE",
             "_ENV_ASSIGNMENT_RE", "_PY_VERSION_SUFFIX_RE"))
        or (isinstance(n, ast.FunctionDef) and n.name == "_bash_actions")]
mod = ast.Module(body=[ast.ClassDef(name="S", bases=[], keywords=[], body=keep, decorator_list=[])], type_ignores=[])
ns = {"re": re, "json": json, "ClassVar": ClassVar, "Any": Any}
exec(compile(ast.fix_missing_locations(mod), "scoring.py", "exec"), ns)
S = ns["S"]()

here = Path(__file__).resolve().parent
for cmd in json.loads((here / "commands.json").read_text()):
    call = {"function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}
    print(json.dumps({"command": cmd, "actions": S._bash_actions({"tool_calls": [call]})}))
for line in open(here.parent / "agentic_coding_2.5h.jsonl"):
    row = json.loads(line)
    if row["role"] != "assistant":
        continue
    print(json.dumps({"conversation_id": row["conversation_id"], "turn": row["turn"],
                      "actions": S._bash_actions(row)}))
