#!/usr/bin/env python3
"""Sends every rule expression and every Grafana panel query to a running Prometheus.

    check_queries.py PROMETHEUS_URL DASHBOARD.json METRICS_SOURCE.cc[,MORE.cc...] [RULE_FILE_NAME]

Each must parse and return series (the Prometheus scrapes a real spexd that has extracted
frames). The rules are read back from Prometheus's /api/v1/rules, so they are checked as
Prometheus loaded them, and each must have evaluated without error. Alert expressions are
also queried without their threshold comparisons (the signal must return series even
when the alert does not fire). Queries on metrics that exist only on GPU servers
(spexd_gpu_memory_bytes) must parse and are reported as not evaluable here. Every spexd_
metric named anywhere must be registered in server/platform/metrics.cc (or another source given).
"""
import json
import re
import sys
import urllib.parse
import urllib.request

GPU_ONLY = ("spexd_gpu_memory_bytes",)
GRAFANA_VARS = {"$__rate_interval": "1m", "$__interval": "15s", "$job": "spexd",
                "${job}": "spexd", "$instance": ".*", "${instance}": ".*"}
COMPARISON = re.compile(r"\s*(==|!=|>=|<=|>|<)\s*(bool\s+)?-?[0-9][0-9.e+]*")


def api(base, path, **params):
    url = f"{base}{path}?{urllib.parse.urlencode(params)}" if params else f"{base}{path}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:  # 400 on a parse error: the body says why
        return json.load(e)


def known_metrics(sources):
    # Every name is registered as a string literal of its own (server/platform/metrics.cc,
    # server/platform/health_metrics.cc).
    names = set()
    for source in sources.split(","):
        names |= set(re.findall(r'"(spexd_[a-z0-9_]+)"', open(source).read()))
    for n in list(names):  # histograms expose _bucket, _sum and _count
        names |= {n + "_bucket", n + "_sum", n + "_count"}
    return names


def main():
    base, dashboard_path, source = sys.argv[1], sys.argv[2], sys.argv[3]
    metrics = known_metrics(source)
    failures, checked, gpu_only = [], 0, []

    def query(label, expr):
        nonlocal checked
        checked += 1
        for name in set(re.findall(r"\bspexd_[a-z0-9_]+", expr)):
            if name not in metrics:
                failures.append(f"{label}: metric {name} is not registered in {source}")
        r = api(base, "/api/v1/query", query=expr)
        if r.get("status") != "success":
            failures.append(f"{label}: does not parse or evaluate: {r.get('error')}\n    {expr}")
            return
        n = len(r["data"]["result"])
        if any(g in expr for g in GPU_ONLY):
            gpu_only.append(label)
            print(f"  parsed, GPU-only metric (no GPU worker here): {label}")
        elif n == 0:
            failures.append(f"{label}: no series\n    {expr}")
        else:
            print(f"  {n:3d} series  {label}")

    print("rules (as loaded by Prometheus):")
    rules = [r for g in api(base, "/api/v1/rules")["data"]["groups"] for r in g["rules"]]
    if not rules:
        failures.append("Prometheus loaded no rules")
    for r in rules:
        label = f"{r['type']} {r['name']}"
        if r.get("health") != "ok":
            failures.append(f"{label}: evaluation health {r.get('health')}: {r.get('lastError')}")
        if r["type"] == "recording":
            query(label, r["query"])
        else:
            signal = COMPARISON.sub("", r["query"])
            query(f"{label} (signal: {signal})", signal)
            r2 = api(base, "/api/v1/query", query=r["query"])
            if r2.get("status") != "success":
                failures.append(f"{label}: alert expression does not evaluate: {r2.get('error')}")

    print("Grafana panels and variables:")
    dash = json.load(open(dashboard_path))
    def subst(expr):
        for k in sorted(GRAFANA_VARS, key=len, reverse=True):
            expr = expr.replace(k, GRAFANA_VARS[k])
        return expr
    for p in dash["panels"]:
        for t in p.get("targets", []):
            query(f"panel '{p['title']}' {t['refId']}", subst(t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", v["query"]["query"])
        if not m:
            failures.append(f"variable {v['name']}: unsupported query {v['query']['query']}")
            continue
        selector, label = subst(m.group(1)), m.group(2)
        r = api(base, "/api/v1/query", query=selector)
        values = {s["metric"].get(label) for s in r.get("data", {}).get("result", [])} - {None}
        checked += 1
        if not values:
            failures.append(f"variable {v['name']}: no values of {label} on {selector}")
        else:
            print(f"  variable {v['name']}: {sorted(values)}")

    for f in failures:
        print("FAIL:", f)
    print(f"{checked} queries checked, {len(gpu_only)} GPU-only (parsed only), {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
