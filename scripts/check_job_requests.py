#!/usr/bin/env python3
"""Jobs never see a request message: the server decodes a request once, at its edge
(server/rpc/request_decode.h), into the typed JobRequest (server/jobs/job_types.h).

This check reads the service's proto file, collects every message and enum a request can
carry (the input types of the services' rpc methods, and the types of their fields,
transitively) that no response carries, and reports each line under server/jobs that names
one of them (`v1::ExtractHeader`, `v1::CudaImage`, an enum value such as `v1::REALTIME`,
or `v1::Priority_IsValid`). Response messages stay allowed: the jobs encode the replies.

  check_job_requests.py SOURCE_DIR   exit 0: "job request types: clean"; 1: the offences
"""
import pathlib
import re
import sys

RPC = re.compile(r"^\s*rpc\s+\w+\s*\(\s*(?:stream\s+)?(\w+)\s*\)\s*returns\s*\(\s*(?:stream\s+)?(\w+)\s*\)")
BLOCK = re.compile(r"^\s*(message|enum)\s+(\w+)\s*\{")
FIELD = re.compile(r"^\s*(?:repeated\s+|optional\s+)?([A-Za-z_][\w.]*)\s+\w+\s*=\s*\d+")
ENUM_VALUE = re.compile(r"^\s*([A-Z][A-Z0-9_]*)\s*=\s*-?\d+")
NAMED = re.compile(r"\bv1::(\w+)")


def parse(proto):
    """(fields: message -> field type names, enums: enum -> value names, rpcs: [(in, out)])."""
    fields, enums, rpcs, stack = {}, {}, [], []
    for line in proto.read_text().splitlines():
        line = line.split("//", 1)[0]
        rpc = RPC.match(line)
        if rpc:
            rpcs.append(rpc.groups())
        block = BLOCK.match(line)
        if block:
            kind, name = block.groups()
            (fields if kind == "message" else enums)[name] = []
            stack.append((kind, name))
        elif stack and stack[-1][0] == "message":
            field = FIELD.match(line)
            if field and not line.strip().startswith(("option", "reserved")):
                fields[stack[-1][1]].append(field.group(1).split(".")[-1])
        elif stack and stack[-1][0] == "enum":
            value = ENUM_VALUE.match(line)
            if value:
                enums[stack[-1][1]].append(value.group(1))
        for _ in range(line.count("}")):
            if stack:
                stack.pop()
        if "{" in line and not block and stack and line.count("{") > line.count("}"):
            stack.append(("oneof", ""))  # a oneof's body: its fields belong to the message
            if len(stack) >= 2 and stack[-2][0] == "message":
                stack[-1] = ("message", stack[-2][1])
    return fields, enums, rpcs


def reachable(roots, fields, enums):
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or (name not in fields and name not in enums):
            continue
        seen.add(name)
        todo.extend(fields.get(name, []))
    return seen


def main(source):
    source = pathlib.Path(source)
    fields, enums, rpcs = parse(source / "proto/spexd/v1/spexd.proto")
    request = reachable([i for i, _ in rpcs], fields, enums)
    response = reachable([o for _, o in rpcs], fields, enums)
    forbidden = request - response
    values = {v: e for e in forbidden if e in enums for v in enums[e]}
    offences = []
    for path in sorted((source / "server/jobs").rglob("*")):
        if path.suffix not in (".h", ".cc"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for name in NAMED.findall(line):
                base = name.split("_IsValid")[0].split("_Name")[0]
                what = base if base in forbidden else values.get(name)
                if what:
                    rel = path.relative_to(source)
                    offences.append(f"{rel}:{number} names v1::{name} (request type {what})")
    for o in offences:
        print(o)
    if offences:
        print(f"job request types: {len(offences)} offence(s); decode in server/rpc instead")
        return 1
    print(f"job request types: clean ({len(forbidden)} request-only types)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
