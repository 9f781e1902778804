#!/usr/bin/python3
"""Writes jinja_cases.json: small templates rendered by the reference renderer
(render.py's render(), the Jinja2 environment transformers uses), one feature
each, and strftime_cases.json: Python's strftime of a fixed time.

Usage: mkjinja.py RENDER_PY OUT_DIR
"""
import importlib.util
import json
import os
import sys
from datetime import datetime

spec = importlib.util.spec_from_file_location("render", sys.argv[1])
render = importlib.util.module_from_spec(spec)
spec.loader.exec_module(render)
out_dir = sys.argv[2]

OBJ = json.loads('{"zeta": 1, "alpha": [1, 2.0, -0.0, 1e16, 1e-05, 0.1, 123456789, 1.5e300, null, true, false], '
                 '"m\u00e9t\u00e9o": "\u6771\u4eac \U0001F326 \\"q\\" \\\\ \\n\\t\\u0001\\u007f <&>", "nested": {"b": {}, "a": []}}')

CASES = [
    ("tojson default", "{{ obj | tojson }}", {"obj": OBJ}),
    ("tojson indent", "{{ obj | tojson(indent=2) }}", {"obj": OBJ}),
    ("tojson sort_keys", "{{ obj | tojson(sort_keys=true) }}", {"obj": OBJ}),
    ("tojson separators", "{{ obj | tojson(separators=[',', ':']) }}", {"obj": OBJ}),
    ("tojson ensure_ascii", "{{ obj | tojson(ensure_ascii=true) }}", {"obj": OBJ}),
    ("tojson scalars", "{{ 1 | tojson }} {{ 2.5 | tojson }} {{ 'x' | tojson }} {{ none | tojson }} {{ true | tojson }}", {}),
    ("items order", "{% for k, v in obj | items %}{{ k }}={{ v }};{% endfor %}", {"obj": {"z": 1, "a": 2, "m": 3}}),
    ("dict methods", "{{ obj.keys() | list }} {% for k, v in obj.items() %}{{ k }}{{ v }}{% endfor %} {{ obj.get('a') }} {{ obj.get('q', 'dflt') }}", {"obj": {"z": 1, "a": 2, "m": 3}}),
    ("dictsort", "{% for k, v in obj | dictsort %}{{ k }}{{ v }},{% endfor %}|{% for k, v in obj | dictsort(reverse=true) %}{{ k }},{% endfor %}|{% for k, v in obj | dictsort(by='value') %}{{ k }},{% endfor %}", {"obj": {"b": 3, "C": 1, "a": 2}}),
    ("tojson escaped", "{{ {'a': '<b>'} | tojson | e }}", {}),
    ("values", "{% for v in obj.values() %}{{ v }},{% endfor %}", {"obj": {"z": 1, "a": 2, "m": 3}}),
    ("split", "{{ s.split('/') | length }}|{{ s.split('/')[-1] }}|{{ t.split('/')[-1] }}|{{ '  a  b '.split() | join(',') }}|{{ 'a,b,c'.split(',', 1) | join('+') }}|{{ 'a,b,c'.rsplit(',', 1) | join('+') }}", {"s": "a/b/c", "t": "nosep"}),
    ("strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ u.strip('\\n') }}][{{ u.strip('x\\n') }}][{{ s | trim }}]", {"s": " \t\u00a0\x1fhi there\u3000\n ", "u": "\nxx a x\n\n"}),
    ("null values", "[{{ n }}][{{ n | string }}][{{ n is none }}][{{ n is defined }}][{{ missing is defined }}][{{ n is sequence }}][{{ n is iterable }}][{{ 'yes' if n else 'no' }}][{{ n ~ '' }}]", {"n": None}),
    ("scalars to string", "{{ b | string }} {{ f | string }} {{ i | string }} {{ f2 }} {{ big }}", {"b": True, "f": 1.5, "i": 3, "f2": 1e20, "big": 1e-7}),
    ("tests", "{{ s is sequence }} {{ l is sequence }} {{ d is mapping }} {{ l is mapping }} {{ s is string }} {{ f is false }} {{ n is false }} {{ z is false }} {{ t is true }} {{ o is true }}", {"s": "str", "l": [1], "d": {"a": 1}, "f": False, "n": None, "z": 0, "t": True, "o": 1}),
    ("negative index", "{{ l[-1] }} {{ l[-2] }} {{ one[-1] }} {{ l[::-1] | join(',') }} {{ l[1:] | join(',') }}", {"l": [1, 2, 3], "one": ["only"]}),
    ("loop vars", "{% for x in l %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{% if loop.previtem is defined %}p{{ loop.previtem }}{% endif %}{% if loop.nextitem is defined %}n{{ loop.nextitem }}{% endif %};{% endfor %}", {"l": ["a", "b", "c"]}),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for x in l %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", {"l": [1, 2, 3]}),
    ("whitespace control", "a\n  {% if true %}\n    b\n  {% endif %}\nc\n{%- if true -%}\n  d  \n{%- endif %}\n", {}),
    ("lstrip only at line start", "{{ a }} {% if true %}x{% endif %}\n  \t{% if true %}y{% endif %}\n  {# c #}\nz  {% if true %}w{% endif %}\n  {%+ if true %}p{% endif %}\n{{ '%}' }} {% set q = '{%' %}{{ q }}\n", {"a": 1}),
    ("trailing newline", "line\n", {}),
    ("two trailing newlines", "line\n\n", {}),
    ("macro", "{% macro wrap(x, tag='b') %}<{{ tag }}>{{ x }}</{{ tag }}>{% endmacro %}{{ wrap('hi') }}{{ wrap('yo', tag='i') | upper }}", {}),
    ("string ops", "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'a' in 'cat' }} {{ 'Hello' | lower }} {{ 'x' * 3 }} {{ 'a-b'.replace('-', '+') }} {{ '%s=%d' | format('k', 4) }}", {}),
    ("raise_exception", "{% if bad %}{{ raise_exception('bad input: ' ~ bad) }}{% endif %}ok", {"bad": ""}),
    ("selectattr", "{{ msgs | selectattr('role', 'equalto', 'user') | list | length }} {{ msgs | map(attribute='role') | join(',') }}", {"msgs": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]}),
    ("dict literal tojson", "{{ {'b': 1, 'a': [1, 2]} | tojson }}", {}),
]


def main():
    cases = []
    for name, template, variables in CASES:
        kwargs = dict(variables)
        cases.append({
            "name": name,
            "template": template,
            "vars": variables,
            "want": render.render(template, [], None, True, **kwargs),
        })
    with open(os.path.join(out_dir, "jinja_cases.json"), "w") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")

    t = datetime(2026, 3, 7, 14, 5, 9, 123456)
    formats = ["%d %b %Y", "%Y-%m-%d", "%A, %B %d, %Y", "%H:%M:%S", "%I:%M %p", "%a %e %b", "%j %w %y", "%-d %B", "%F %T", "%c", "100%%"]
    with open(os.path.join(out_dir, "strftime_cases.json"), "w") as f:
        json.dump({"time": t.isoformat(), "cases": [{"format": fm, "want": t.strftime(fm)} for fm in formats]}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
