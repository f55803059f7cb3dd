#!/usr/bin/python3
"""Validates deploy/kubernetes offline: every object against its Kubernetes API schema
(schemas.json beside this file, made by make_schemas.py; the ServiceMonitor's from the
Prometheus Operator's CRD) with python3-jsonschema, then checks that the objects agree
with each other (selectors, ports, probes, volumes, config, grace period, HPA target,
kustomization). Prints each check; exits 1 on any failure.

    tests/deploy/k8s/check_manifests.py deploy/kubernetes
"""
import json
import os
import posixpath
import sys

import jsonschema
import yaml

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas.json")


class Checks:
    def __init__(self):
        self.count, self.failures = 0, []

    def __call__(self, ok, what):
        self.count += 1
        print(f"  {'ok  ' if ok else 'FAIL'}  {what}")
        if not ok:
            self.failures.append(what)


def schema_errors(obj, schemas):
    """The schema's complaints about obj, one line each ([] when valid)."""
    name = schemas["kinds"].get(f"{obj.get('apiVersion')} {obj.get('kind')}")
    if name is None:
        return [f"no schema for {obj.get('apiVersion')} {obj.get('kind')} (make_schemas.py KINDS)"]
    schema = {"definitions": schemas["definitions"], "allOf": [{"$ref": f"#/definitions/{name}"}]}
    validator = jsonschema.Draft7Validator(schema)
    return sorted(f"{'/'.join(map(str, e.absolute_path)) or '(object)'}: {e.message}"
                  for e in validator.iter_errors(obj))


def main(directory):
    with open(SCHEMAS) as f:
        schemas = json.load(f)
    check = Checks()
    print("schemas:")
    objects = []
    for file in sorted(f for f in os.listdir(directory) if f.endswith(".yaml")):
        if file == "kustomization.yaml":
            continue
        with open(os.path.join(directory, file)) as f:
            for obj in yaml.safe_load_all(f):
                if not obj:
                    continue
                errors = schema_errors(obj, schemas)
                check(not errors, f"{file}: {obj.get('apiVersion')} {obj.get('kind')} "
                      f"{obj.get('metadata', {}).get('name')}" + "".join("\n        " + e
                                                                         for e in errors))
                objects.append((file, obj))

    def one(kind):
        return [o for _, o in objects if o.get("kind") == kind]

    (deploy,), (service,), (pdb,) = one("Deployment"), one("Service"), one("PodDisruptionBudget")
    (hpa,), (monitor,) = one("HorizontalPodAutoscaler"), one("ServiceMonitor")
    (secret,), (pvc,) = one("Secret"), one("PersistentVolumeClaim")
    config = next(c for c in one("ConfigMap") if "spexd.conf" in c.get("data", {}))
    adapter = next(c for c in one("ConfigMap") if "config.yaml" in c.get("data", {}))
    pod = deploy["spec"]["template"]
    container = pod["spec"]["containers"][0]
    pod_labels = pod["metadata"]["labels"]
    port_by_name = {p.get("name"): p["containerPort"] for p in container["ports"]}
    env = {e["name"]: e.get("value") for e in container.get("env", [])}

    def selects(selector):
        return all(pod_labels.get(k) == v for k, v in selector.items())

    print("consistency:")
    check(selects(deploy["spec"]["selector"]["matchLabels"]),
          "Deployment selector matches its pod labels")
    check(service["spec"].get("clusterIP") == "None",
          "Service is headless (dns:/// round robin over pods)")
    check(selects(service["spec"]["selector"]), "Service selector matches the pod labels")
    for p in service["spec"]["ports"]:
        t = p.get("targetPort")
        target = port_by_name.get(t) if isinstance(t, str) else t
        check(target is not None, f"Service port {p['name']} targets a container port ({t})")
        check(target == p["port"],
              f"Service port {p['name']} ({p['port']}) equals the container port ({target})")
    check(selects(pdb["spec"]["selector"]["matchLabels"]),
          "PodDisruptionBudget selector matches the pod labels")
    check(str(env.get("SPEXD_PORT")) == str(port_by_name.get("grpc")),
          f"SPEXD_PORT ({env.get('SPEXD_PORT')}) is the grpc container port")
    check(str(env.get("SPEXD_METRICS_PORT")) == str(port_by_name.get("metrics")),
          f"SPEXD_METRICS_PORT ({env.get('SPEXD_METRICS_PORT')}) is the metrics container port")
    for name in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc = (container.get(name) or {}).get("grpc") or {}
        check(grpc.get("port") == port_by_name.get("grpc"),
              f"{name} is a native gRPC probe on the grpc port")
        check(grpc.get("service", "") == "", f"{name} checks the server's overall health (\"\")")
    ann = pod["metadata"].get("annotations", {})
    check(ann.get("prometheus.io/scrape") == "true"
          and str(ann.get("prometheus.io/port")) == str(port_by_name.get("metrics")),
          "scrape annotations name the metrics port")
    service_ports = {p["name"] for p in service["spec"]["ports"]}
    check(all(e.get("port") in service_ports for e in monitor["spec"]["endpoints"]),
          "ServiceMonitor endpoints name Service ports")
    check(all(service["metadata"]["labels"].get(k) == v
              for k, v in monitor["spec"]["selector"]["matchLabels"].items()),
          "ServiceMonitor selector matches the Service labels")
    check(service["metadata"]["labels"].get(monitor["spec"].get("jobLabel")) == "spexd",
          'ServiceMonitor jobLabel gives job="spexd" (deploy/prometheus rules)')
    conf = {}
    for line in config["data"]["spexd.conf"].splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition("=")
            conf[key.strip()] = value.strip()
    drain = float(conf.get("drain_seconds", 30))
    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
    check(grace > drain + 5,
          f"terminationGracePeriodSeconds ({grace}) exceeds the drain ({drain:g} s) with margin")
    resources = container.get("resources", {})
    check(resources.get("requests", {}).get("nvidia.com/gpu") == "1"
          and resources.get("limits", {}).get("nvidia.com/gpu") == "1",
          "one nvidia.com/gpu requested and limited")
    check("memory" in resources.get("limits", {}) and "cpu" in resources.get("requests", {}),
          "CPU and memory requests and limits set")
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for m in container["volumeMounts"]:
        check(m["name"] in volumes, f"volumeMount {m['name']} has a volume")
    data_claim = volumes.get("data", {}).get("persistentVolumeClaim", {})
    check(mounts.get("data", {}).get("mountPath") == env.get("SPEXD_DATA_ROOTS")
          and mounts["data"].get("readOnly") is True and data_claim.get("readOnly") is True,
          "data volume mounted read-only at the data root")
    check(data_claim.get("claimName") == pvc["metadata"]["name"],
          "data volume claims the PVC defined here")
    check(volumes.get("config", {}).get("configMap", {}).get("name") == config["metadata"]["name"],
          "config volume is the ConfigMap")

    def arg(flag):
        return next((a.split("=", 1)[1] for a in container.get("args", [])
                     if a.startswith(f"--{flag}=")), None)

    config_mount = mounts.get("config", {})
    want_config = posixpath.join(posixpath.dirname(config_mount.get("mountPath", "")),
                                 config_mount.get("subPath", ""))
    check(arg("config") == want_config, f"--config ({arg('config')}) is the mounted ConfigMap key")
    check(volumes.get("secrets", {}).get("secret", {}).get("secretName") == secret["metadata"]["name"],
          "secrets volume is the Secret")
    token = arg("auth_token_file") or ""
    secret_keys = set(secret.get("stringData") or secret.get("data") or {})
    check(token.startswith(mounts.get("secrets", {}).get("mountPath", "?") + "/")
          and posixpath.basename(token) in secret_keys,
          f"--auth_token_file ({token}) is a key of the mounted Secret")
    check({"tls.crt", "tls.key"} <= secret_keys, "Secret has TLS key pair entries")
    target = hpa["spec"]["scaleTargetRef"]
    check(target.get("kind") == "Deployment" and target.get("name") == deploy["metadata"]["name"],
          "HPA scales the Deployment")
    metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    check(f'as: "{metric}"' in adapter["data"]["config.yaml"],
          f"prometheus-adapter rule serves the HPA metric {metric}")
    check(hpa["spec"].get("minReplicas", 1) >= 2 and pdb["spec"].get("maxUnavailable") == 1,
          "at least two replicas; disruptions take one at a time")
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        listed = set(yaml.safe_load(f)["resources"])
    for file in sorted({file for file, _ in objects} - {"prometheus-adapter-rules.yaml"}):
        check(file in listed, f"kustomization lists {file}")
    for file in sorted(listed):
        check(os.path.exists(os.path.join(directory, file)), f"kustomization resource {file} exists")

    print(f"{check.count} checks, {len(check.failures)} failures")
    return 1 if check.failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().split("\n\n")[1])
    sys.exit(main(sys.argv[1]))
