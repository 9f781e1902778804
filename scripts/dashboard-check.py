#!/usr/bin/env python3
"""dashboard-check.py: a Grafana dashboard's PromQL against live edgellmd
scrapes and a live Prometheus (scripts/dashboard-check.sh runs it).

  dashboard-check.py DASHBOARD.json --scrape FILE [--scrape FILE...]
                     [--prom URL --instance HOST:PORT [--instance ...]]

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
