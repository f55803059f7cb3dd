#!/usr/bin/python3
"""Writes schemas.json beside this file: JSON Schemas of the Kubernetes kinds that
deploy/kubernetes uses, for check_manifests.py (python3-jsonschema, offline).

    make_schemas.py SWAGGER.json SERVICEMONITOR_CRD.yaml > schemas.json

SWAGGER.json: Kubernetes' OpenAPI v2 document (api/openapi-spec/swagger.json of a
Kubernetes release; the kubernetes Python client ships it too). SERVICEMONITOR_CRD.yaml:
the Prometheus Operator's CustomResourceDefinition of ServiceMonitor
(example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml). Both are
Apache-2.0. The schemas.json kept here was made from Kubernetes 1.36's document and
the Prometheus Operator 0.93.0's CRD. Only the definitions the kinds below reach are
kept, without their descriptions, so that the file stays small; rerun this when
deploy/kubernetes uses another kind or a newer API.

As kubeconform's strict mode does, every object schema with listed properties refuses
others (a misspelt field fails), and the two types that Kubernetes encodes specially take
what the API server takes: IntOrString an integer or a string, Quantity a number or a
string.
"""
import json
import sys

import yaml

KINDS = [("v1", "ConfigMap"), ("v1", "PersistentVolumeClaim"), ("v1", "Secret"),
         ("v1", "Service"), ("apps/v1", "Deployment"), ("autoscaling/v2", "HorizontalPodAutoscaler"),
         ("policy/v1", "PodDisruptionBudget")]
CRD_KIND = ("monitoring.coreos.com/v1", "ServiceMonitor")
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
SPECIAL = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": ["integer", "string"]},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": ["number", "string"]},
}
DROP = {"description", "format", "example", "default"}


def strip(node, refs):
    """node without prose and extensions, its objects closed; the $refs it names go to refs."""
    if isinstance(node, list):
        return [strip(n, refs) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in DROP or key.startswith("x-"):
            continue
        if key == "$ref":
            refs.add(value.rsplit("/", 1)[1])
        # Property names are data, not keywords: keep every one.
        out[key] = ({k: strip(v, refs) for k, v in value.items()} if key == "properties"
                    else strip(value, refs))
    if ("properties" in out and "additionalProperties" not in out
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def gvk_name(definitions, api_version, kind):
    group, _, version = api_version.rpartition("/")
    for name, d in definitions.items():
        for g in d.get("x-kubernetes-group-version-kind", []):
            if (g["group"], g["version"], g["kind"]) == (group, version, kind):
                return name
    raise SystemExit(f"make_schemas: no definition of {api_version} {kind}")


def pin_kind(schema, api_version, kind):
    """apiVersion and kind fixed, and required with metadata, as the API server requires."""
    schema["properties"]["apiVersion"] = {"enum": [api_version]}
    schema["properties"]["kind"] = {"enum": [kind]}
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind",
                                                                    "metadata"})
    return schema


def main(swagger_path, crd_path):
    with open(swagger_path) as f:
        definitions = json.load(f)["definitions"]
    with open(crd_path) as f:
        crd = yaml.safe_load(f)
    out, kinds, pending = {}, {}, set()
    for api_version, kind in KINDS:
        name = gvk_name(definitions, api_version, kind)
        kinds[f"{api_version} {kind}"] = name
        pending.add(name)
    while pending:
        name = pending.pop()
        if name in out:
            continue
        refs = set()
        out[name] = SPECIAL.get(name) or strip(definitions[name], refs)
        pending |= refs - out.keys()
    for name in kinds.values():
        api_version, kind = next(k for k, n in kinds.items() if n == name).split(" ")
        pin_kind(out[name], api_version, kind)
    # The CRD's served version, its metadata the API's ObjectMeta.
    api_version, kind = CRD_KIND
    (version,) = [v for v in crd["spec"]["versions"]
                  if f"{crd['spec']['group']}/{v['name']}" == api_version]
    schema = strip(version["schema"]["openAPIV3Schema"], set())
    schema["properties"]["metadata"] = {"$ref": f"#/definitions/{OBJECT_META}"}
    name = "com.coreos.monitoring.v1.ServiceMonitor"
    out[name] = pin_kind(schema, api_version, kind)
    kinds[f"{api_version} {kind}"] = name
    # One definition a line: small diffs when regenerated.
    dump = lambda v: json.dumps(v, sort_keys=True, separators=(",", ":"))  # noqa: E731
    lines = [f"  {dump(n)}: {dump(out[n])}" for n in sorted(out)]
    sys.stdout.write('{\n"kinds": ' + dump(kinds) + ',\n"definitions": {\n'
                     + ",\n".join(lines) + "\n}\n}\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(*sys.argv[1:])
