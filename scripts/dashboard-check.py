#!/usr/bin/env python3
"""dashboard-check.py: a Grafana dashboard's PromQL against live edgellmd
scrapes and a live Prometheus (scripts/dashboard-check.sh runs it).

  dashboard-check.py DASHBOARD.json --scrape FILE [--scrape FILE...]
                     [--prom URL --instance HOST:PORT [--instance ...]]

0. The dashboard's structure: unique panel ids, panels within the grid,
   every panel on the ${datasource} variable with unique refIds, rows
   repeated over a multi-value variable.
1. Every expression of the dashboard (each panel's targets, panels inside
   rows included, and the template variables' label_values() queries) is
   taken apart into the metric names it selects. Each name must be a series
   name in every scrape (a histogram's _bucket/_sum/_count as exposed):
   a panel that queries a metric the daemon does not export fails.
2. With --prom, every expression is sent to Prometheus' /api/v1/query with
   Grafana's variables filled in ($instance: each box alone, then all of
   them; $__rate_interval: 10s), and must parse and return at least one
   sample for each.

Exit status 1 on any failure, with what failed and why.
"""

import argparse
import json
import re
import sys
import urllib.parse
import urllib.request

# PromQL words that are not metric names: aggregation and binary-operator
# modifiers, set operators, and the literals.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "inf", "nan", "atan2",
}
LABEL_LIST_AFTER = {"by", "without", "on", "ignoring", "group_left", "group_right"}
IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def strip_strings(expr):
    """Returns expr with string literals emptied ("" kept), so that nothing
    inside quotes is read as a name."""
    out, i = [], 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            j = i + 1
            while j < len(expr) and expr[j] != c:
                j += 2 if expr[j] == "\\" and c != "`" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def metric_names(expr):
    """The metric names a PromQL expression selects."""
    names = set()
    # {__name__="x"} and {__name__=~"x"} selectors name their metric there.
    for m in re.finditer(r'__name__\s*=~?\s*"([^"]*)"', expr):
        names.add(m.group(1))
    # Grafana variables ($x, ${x}, [[x]]) never name metrics.
    e = re.sub(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[^\]]*\]\]", "", expr)
    e = strip_strings(e)
    # Label matchers and ranges/subqueries hold labels and durations.
    e = re.sub(r"\{[^{}]*\}", " ", e)
    e = re.sub(r"\[[^\[\]]*\]", " ", e)
    i = 0
    while i < len(e):
        m = IDENT.match(e, i)
        if not m or (i > 0 and (e[i - 1].isalnum() or e[i - 1] in "_.")):
            i += 1
            continue
        word = m.group(0)
        j = m.end()
        rest = e[j:].lstrip()
        if word in LABEL_LIST_AFTER:
            # by (a, b): skip the label list.
            if rest.startswith("("):
                k = e.index("(", j)
                i = e.index(")", k) + 1
            else:
                i = j
            continue
        if word.lower() in KEYWORDS or rest.startswith("(") or re.match(r"(by|without)\b", rest):
            i = j  # a keyword, a function or aggregation call, "sum by (..) (..)"
            continue
        names.add(word)
        i = j
    return names


def expressions(dash):
    """(where, expr, is_variable) for every PromQL expression of a dashboard."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f'panel "{p.get("title")}" {t.get("refId")}', t["expr"], False))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query", "")
        m = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", q or "")
        if m:
            out.append((f'variable "{v["name"]}"', m.group(1), True))
        elif q:
            out.append((f'variable "{v["name"]}"', q, True))
    return out


def structure(dash):
    """What Grafana would take badly: duplicate panel ids, a panel outside
    the 24-column grid, a target without a unique refId, a panel not on the
    dashboard's data source variable, a row repeated over a variable that
    does not exist. Returns the problems found."""
    bad = []
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ids = set()

    def walk(panels):
        for p in panels:
            t = f'panel "{p.get("title")}"'
            if p.get("id") in ids:
                bad.append(f"{t}: id {p.get('id')} used twice")
            ids.add(p.get("id"))
            g = p.get("gridPos", {})
            if not all(k in g for k in ("x", "y", "w", "h")) or g["x"] < 0 or g["w"] <= 0 or g["x"] + g["w"] > 24:
                bad.append(f"{t}: gridPos {g} is not within the 24 columns")
            if p.get("type") != "row":
                ds = p.get("datasource") or {}
                if ds.get("uid") != "${datasource}":
                    bad.append(f"{t}: data source {ds} is not the ${{datasource}} variable")
                refs = [x.get("refId") for x in p.get("targets", [])]
                if not refs or len(set(refs)) != len(refs) or None in refs:
                    bad.append(f"{t}: targets' refIds {refs} are missing or not unique")
            r = p.get("repeat")
            if r and not (r in variables and variables[r].get("multi")):
                bad.append(f"{t}: repeats over ${r}, which is not a multi-value variable")
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    if "datasource" not in variables or variables["datasource"].get("type") != "datasource":
        bad.append("no datasource variable of type datasource")
    return bad


def scrape_names(path):
    names = set()
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            m = IDENT.match(line)
            if m:
                names.add(m.group(0))
    return names


def query(prom, expr):
    url = prom.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.load(r)
    except urllib.error.HTTPError as err:
        body = json.load(err)
    if body.get("status") != "success":
        return None, f'{body.get("errorType")}: {body.get("error")}'
    data = body["data"]
    if data["resultType"] in ("scalar", "string"):
        return 1, None
    return len(data["result"]), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dashboard")
    ap.add_argument("--scrape", action="append", default=[])
    ap.add_argument("--prom")
    ap.add_argument("--instance", action="append", default=[])
    a = ap.parse_args()

    with open(a.dashboard) as f:
        dash = json.load(f)
    exprs = expressions(dash)
    if not exprs:
        print(f"{a.dashboard}: no PromQL expressions found")
        return 1
    scrapes = [(p, scrape_names(p)) for p in a.scrape]
    fails = 0
    if scrapes or not a.prom:
        problems = structure(dash)
        for b in problems:
            print(f"FAIL  {b}")
        fails += len(problems)
        if not problems:
            print("ok    structure: panel ids unique, all within the 24-column grid, on the ${datasource} "
                  "variable, refIds unique, rows repeated over a multi-value variable")
    all_names = set()
    for where, expr, _ in exprs:
        names = metric_names(expr)
        all_names |= names
        if not names:
            print(f"FAIL  {where}: no metric name found in {expr!r}")
            fails += 1
        for path, have in scrapes:
            for n in sorted(names - have):
                print(f"FAIL  {where}: {n} is not in the scrape {path} ({expr})")
                fails += 1
    if scrapes:
        print(f"{'ok  ' if fails == 0 else 'FAIL'}  {len(exprs)} expressions select {len(all_names)} metrics, "
              f"each in all {len(scrapes)} scrapes: {' '.join(sorted(all_names))}")

    if a.prom:
        insts = a.instance or []
        # As Grafana writes a regex variable into a PromQL string: the
        # regex escapes, their backslashes doubled for the string literal.
        esc = [re.escape(i).replace("\\", "\\\\") for i in insts]
        choices = esc + (["|".join(esc)] if len(esc) > 1 else [])
        n = 0
        for where, expr, is_var in exprs:
            for inst in choices:
                e = expr.replace("$__rate_interval", "10s").replace("$__interval", "10s")
                e = e.replace("${instance}", inst).replace("$instance", inst)
                count, err = query(a.prom, e)
                n += 1
                if err:
                    print(f"FAIL  {where}: Prometheus refused {e!r}: {err}")
                    fails += 1
                elif count == 0:
                    print(f"FAIL  {where}: no data for instance=~{inst!r}: {e}")
                    fails += 1
        print(f"{'ok  ' if fails == 0 else 'FAIL'}  {n} queries to Prometheus ({len(exprs)} expressions x "
              f"{len(choices)} instance choices) parse and return data")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
