// Validates deploy/kubernetes offline: every object against the Kubernetes API schemas
// (kubernetes-models; the ServiceMonitor against the Prometheus Operator's CRD schema),
// then checks that the objects agree with each other (selectors, ports, probes, volumes,
// config, grace period, HPA target, kustomization). Prints each check; exits 1 on any failure.
//   node tests/deploy/k8s/check_manifests.mjs deploy/kubernetes
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import YAML from "yaml";

const require = createRequire(import.meta.url);
const dir = process.argv[2];
const failures = [];
let checks = 0;
function check(ok, what) {
  checks += 1;
  if (ok) console.log(`  ok    ${what}`);
  else { console.log(`  FAIL  ${what}`); failures.push(what); }
}

function modelFor(apiVersion, kind) {
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    return require(`@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`)[kind];
  }
  return require(`kubernetes-models/${apiVersion}/${kind}`)[kind];
}

// 1. Schemas.
console.log("schemas:");
const objects = [];
const files = fs.readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort();
for (const file of files) {
  if (file === "kustomization.yaml") continue;
  for (const doc of YAML.parseAllDocuments(fs.readFileSync(path.join(dir, file), "utf8"))) {
    const obj = doc.toJS();
    if (!obj) continue;
    let error = null;
    try {
      const Model = modelFor(obj.apiVersion, obj.kind);
      new Model(obj).validate();
    } catch (e) {
      error = e.message;
    }
    check(error === null, `${file}: ${obj.apiVersion} ${obj.kind} ${obj.metadata?.name}${error ? ": " + error : ""}`);
    objects.push({ file, obj });
  }
}
const one = (kind) => objects.filter((o) => o.obj.kind === kind).map((o) => o.obj);
const [deploy] = one("Deployment");
const [service] = one("Service");
const [pdb] = one("PodDisruptionBudget");
const [hpa] = one("HorizontalPodAutoscaler");
const [monitor] = one("ServiceMonitor");
const [secret] = one("Secret");
const [pvc] = one("PersistentVolumeClaim");
const config = one("ConfigMap").find((c) => c.data?.["spexd.conf"]);
const adapter = one("ConfigMap").find((c) => c.data?.["config.yaml"]);
const pod = deploy.spec.template;
const container = pod.spec.containers[0];
const podLabels = pod.metadata.labels;
const selects = (selector) => Object.entries(selector).every(([k, v]) => podLabels[k] === v);
const portByName = Object.fromEntries(container.ports.map((p) => [p.name, p.containerPort]));
const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));

// 2. Cross-checks.
console.log("consistency:");
check(selects(deploy.spec.selector.matchLabels), "Deployment selector matches its pod labels");
check(service.spec.clusterIP === "None", "Service is headless (dns:/// round robin over pods)");
check(selects(service.spec.selector), "Service selector matches the pod labels");
for (const p of service.spec.ports) {
  const target = typeof p.targetPort === "string" ? portByName[p.targetPort] : p.targetPort;
  check(target !== undefined, `Service port ${p.name} targets a container port (${p.targetPort})`);
  check(target === p.port, `Service port ${p.name} (${p.port}) equals the container port (${target})`);
}
check(selects(pdb.spec.selector.matchLabels), "PodDisruptionBudget selector matches the pod labels");
check(Number(env.SPEXD_PORT) === portByName.grpc, `SPEXD_PORT (${env.SPEXD_PORT}) is the grpc container port`);
check(Number(env.SPEXD_METRICS_PORT) === portByName.metrics, `SPEXD_METRICS_PORT (${env.SPEXD_METRICS_PORT}) is the metrics container port`);
for (const name of ["startupProbe", "readinessProbe", "livenessProbe"]) {
  const probe = container[name];
  check(probe?.grpc?.port === portByName.grpc, `${name} is a native gRPC probe on the grpc port`);
  check((probe?.grpc?.service ?? "") === "", `${name} checks the server's overall health ("")`);
}
const ann = pod.metadata.annotations ?? {};
check(ann["prometheus.io/scrape"] === "true" && Number(ann["prometheus.io/port"]) === portByName.metrics,
      "scrape annotations name the metrics port");
check(monitor.spec.endpoints.every((e) => service.spec.ports.some((p) => p.name === e.port)),
      "ServiceMonitor endpoints name Service ports");
check(Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => service.metadata.labels[k] === v),
      "ServiceMonitor selector matches the Service labels");
check(service.metadata.labels[monitor.spec.jobLabel] === "spexd",
      "ServiceMonitor jobLabel gives job=\"spexd\" (deploy/prometheus rules)");
const conf = Object.fromEntries(config.data["spexd.conf"].split("\n")
  .map((l) => l.replace(/#.*/, "").trim()).filter(Boolean).map((l) => l.split("=").map((s) => s.trim())));
const drain = Number(conf.drain_seconds ?? 30);
check(pod.spec.terminationGracePeriodSeconds > drain + 5,
      `terminationGracePeriodSeconds (${pod.spec.terminationGracePeriodSeconds}) exceeds the drain (${drain} s) with margin`);
check(container.resources.requests["nvidia.com/gpu"] === "1" && container.resources.limits["nvidia.com/gpu"] === "1",
      "one nvidia.com/gpu requested and limited");
check(container.resources.limits.memory !== undefined && container.resources.requests.cpu !== undefined,
      "CPU and memory requests and limits set");
const mounts = Object.fromEntries(container.volumeMounts.map((m) => [m.name, m]));
const volumes = Object.fromEntries(pod.spec.volumes.map((v) => [v.name, v]));
for (const m of container.volumeMounts) check(volumes[m.name] !== undefined, `volumeMount ${m.name} has a volume`);
check(mounts.data?.mountPath === env.SPEXD_DATA_ROOTS && mounts.data.readOnly === true &&
      volumes.data.persistentVolumeClaim?.readOnly === true, "data volume mounted read-only at the data root");
check(volumes.data.persistentVolumeClaim?.claimName === pvc.metadata.name, "data volume claims the PVC defined here");
check(volumes.config.configMap?.name === config.metadata.name, "config volume is the ConfigMap");
const arg = (flag) => container.args.find((a) => a.startsWith(`--${flag}=`))?.split("=")[1];
check(arg("config") === path.posix.join(path.posix.dirname(mounts.config.mountPath), mounts.config.subPath ?? ""),
      `--config (${arg("config")}) is the mounted ConfigMap key`);
check(volumes.secrets.secret?.secretName === secret.metadata.name, "secrets volume is the Secret");
const tokenPath = arg("auth_token_file");
check(tokenPath?.startsWith(mounts.secrets.mountPath + "/") &&
      Object.keys(secret.stringData ?? secret.data ?? {}).includes(path.posix.basename(tokenPath)),
      `--auth_token_file (${tokenPath}) is a key of the mounted Secret`);
check(["tls.crt", "tls.key"].every((k) => k in (secret.stringData ?? secret.data ?? {})), "Secret has TLS key pair entries");
check(hpa.spec.scaleTargetRef.kind === "Deployment" && hpa.spec.scaleTargetRef.name === deploy.metadata.name,
      "HPA scales the Deployment");
const hpaMetric = hpa.spec.metrics[0].pods.metric.name;
check(adapter.data["config.yaml"].includes(`as: "${hpaMetric}"`), `prometheus-adapter rule serves the HPA metric ${hpaMetric}`);
check(hpa.spec.minReplicas >= 2 && pdb.spec.maxUnavailable === 1, "at least two replicas; disruptions take one at a time");
const kust = YAML.parse(fs.readFileSync(path.join(dir, "kustomization.yaml"), "utf8"));
const listed = new Set(kust.resources);
for (const { file } of objects) {
  if (file === "prometheus-adapter-rules.yaml") continue;
  check(listed.has(file), `kustomization lists ${file}`);
}
for (const f of listed) check(fs.existsSync(path.join(dir, f)), `kustomization resource ${f} exists`);

console.log(`${checks} checks, ${failures.length} failures`);
process.exit(failures.length ? 1 : 0);
