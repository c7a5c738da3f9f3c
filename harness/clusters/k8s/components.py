"""Configuration files and manifests of each component: containerd, CNI, kubelet, CoreDNS,
JobSet, Kueue (config, CRDs, webhook configurations rewritten to 127.0.0.1). Their command lines
are in ``commands.py``.
"""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import yaml

from harness.clusters.k8s import builds, pki, rate_limits
from harness.clusters.k8s.layout import (
    BRIDGE_PREFIX,
    CGROUP_PARENT,
    CLUSTER_DOMAIN,
    COREDNS_HEALTH,
    COREDNS_READY,
    DNS_IP,
    JOBSET_PORTS,
    KUEUE_PORTS,
    NODE_LEASE_DURATION_SECONDS,
    NODE_STATUS_UPDATE_FREQUENCY,
    PAUSE_IMAGE,
    Layout,
    kubelet_healthz_port,
    kubelet_port,
    node_ip,
    save_state,
)

# ------------------------------------------------------------------ component configs

def containerd_config(L: Layout, node: str) -> Path:
    d = L.node(node)
    for sub in ("containerd-root", "containerd-state", "cni/net.d", "cni/ipam", "runc"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    toml = f"""version = 2
root = "{d / 'containerd-root'}"
state = "{d / 'containerd-state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{L.containerd_sock(node)}"

[ttrpc]
  address = "{L.containerd_sock(node)}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{d / 'containerd-opt'}"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  enable_selinux = false
  disable_apparmor = true
  # this host (and containers generally) lack CAP_SYS_RESOURCE: runc cannot lower oom_score_adj
  restrict_oom_score_adj = true
  max_container_log_line_size = 16384

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  discard_unpacked_layers = false

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{d / 'runc'}"

[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{d / 'cni/net.d'}"
  max_conf_num = 1
"""
    path = d / "containerd.toml"
    path.write_text(toml)
    return path


def cni_config(L: Layout, node: str, i: int) -> None:
    conf = {
        "cniVersion": "1.0.0",
        "name": "poc-native",
        "plugins": [{
            "type": "bridge",
            "bridge": f"{BRIDGE_PREFIX}{i}",
            "isGateway": True,
            "ipMasq": False,
            "hairpinMode": True,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": f"10.244.{i}.0/24", "gateway": node_ip(i)}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": str(L.node(node) / "cni/ipam"),
            },
        }],
    }
    (L.node(node) / "cni/net.d/10-poc-native.conflist").write_text(json.dumps(conf, indent=2))


def kubelet_config(L: Layout, node: str, i: int, certs: dict) -> Path:
    d = L.node(node)
    (d / "kubelet").mkdir(parents=True, exist_ok=True)
    (d / "volume-plugins").mkdir(parents=True, exist_ok=True)
    server = certs[f"kubelet-server-{node}"]
    cfg = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node_ip(i),
        "port": kubelet_port(i),
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": kubelet_healthz_port(i),
        "tlsCertFile": str(server.cert),
        "tlsPrivateKeyFile": str(server.key),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(certs["ca"].cert)}},
        # every call to the kubelet's API is authorised by the API server (a SubjectAccessReview, as
        # nodes/proxy, nodes/log...): a user's certificate reaches only what RBAC grants it there
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{CGROUP_PARENT}/{node}",
        "cgroupsPerQOS": True,
        "containerRuntimeEndpoint": f"unix://{L.containerd_sock(node)}",
        "clusterDNS": [DNS_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": "/etc/resolv.conf",
        "failSwapOn": False,
        "imageGCHighThresholdPercent": 100,   # containerd 1.6.20 does not pin the sandbox image
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "nodeStatusUpdateFrequency": NODE_STATUS_UPDATE_FREQUENCY,
        "nodeLeaseDurationSeconds": NODE_LEASE_DURATION_SECONDS,
        "rotateCertificates": False,
        "serializeImagePulls": False,
        "maxPods": 60,
        "volumePluginDir": str(d / "volume-plugins"),
        # per node: a kubelet deletes log directories of pods it does not know
        "podLogsDir": str(d / "pod-logs"),
        "registerNode": True,
        "shutdownGracePeriod": "0s",
        "localStorageCapacityIsolation": True,
    }
    path = d / "kubelet-config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def coredns_config(L: Layout) -> Path:
    L.config.mkdir(parents=True, exist_ok=True)
    corefile = f""".:53 {{
    bind {DNS_IP}
    errors
    health 127.0.0.1:{COREDNS_HEALTH}
    ready 127.0.0.1:{COREDNS_READY}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {L.pki / 'coredns.kubeconfig'} poc-native
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    forward . /etc/resolv.conf
    loop
}}
"""
    path = L.config / "Corefile"
    path.write_text(corefile)
    return path


def jobset_config(L: Layout) -> Path:
    cfg = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": JOBSET_PORTS["webhook"], "host": "127.0.0.1", "certDir": str(L.pki / "webhook-certs")},
        "metrics": {"bindAddress": f"127.0.0.1:{JOBSET_PORTS['metrics']}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{JOBSET_PORTS['health']}"},
    }
    path = L.config / "jobset.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def kueue_config(L: Layout) -> Path:
    cfg = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{KUEUE_PORTS['health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{KUEUE_PORTS['metrics']}"},
        "webhook": {"port": KUEUE_PORTS["webhook"], "host": "127.0.0.1", "certDir": str(L.pki / "webhook-certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
    }
    client = rate_limits.kueue_client_connection(L)    # `poc cluster up --client-qps`; else Kueue's default
    if client:
        cfg["clientConnection"] = client
    cfg |= rate_limits.kueue_fair_sharing(L)           # `poc cluster up --kueue-fair-sharing on`; else off
    path = L.config / "kueue.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# Kueue webhooks we install: those for the integrations we enable and Kueue's own objects.
# (Pod/Deployment/StatefulSet and the Kubeflow/Ray ones are no-ops with those integrations off,
# but they fail closed, so every pod create would fail while Kueue is down.)
KUEUE_WEBHOOK_GROUPS = {"batch", "jobset.x-k8s.io", "kueue.x-k8s.io"}


def webhook_manifests(L: Layout, certs: dict, jobset_version: str = builds.JOBSET_VERSION,
                      kueue_version: str = builds.KUEUE_VERSION) -> Path:
    """JobSet's and Kueue's webhook configurations, rewritten from service to url + caBundle
    (the versions: the pinned ones, or the upgrade drill's next ones)."""
    ca_b64 = pki.ca_bundle_b64(certs["ca"])
    out = []
    for who, version, ports, prefix in (("jobset", jobset_version, JOBSET_PORTS, "jobset-"),
                                        ("kueue", kueue_version, KUEUE_PORTS, "kueue-")):
        src = builds.module_dir(f"sigs.k8s.io/{who}", version) / "config/components/webhook/manifests.yaml"
        for original in yaml.safe_load_all(src.read_text()):
            if not original:
                continue
            doc = copy.deepcopy(original)
            doc["metadata"] = {"name": prefix + doc["metadata"]["name"]}
            hooks = []
            for hook in doc.get("webhooks", []):
                groups = {g for r in hook.get("rules", []) for g in r.get("apiGroups", [])}
                if who == "kueue" and not groups <= KUEUE_WEBHOOK_GROUPS:
                    continue
                if who == "jobset" and hook["name"] in ("mpod.kb.io", "vpod.kb.io"):
                    # the upstream kustomize patch: only pods that belong to a JobSet
                    hook["objectSelector"] = {"matchExpressions": [
                        {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
                path = hook["clientConfig"]["service"].get("path", "/")
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{ports['webhook']}{path}", "caBundle": ca_b64}
                hook["timeoutSeconds"] = 10
                hooks.append(hook)
            doc["webhooks"] = hooks
            out.append(doc)
    path = L.manifests / "webhooks.yaml"
    path.write_text(yaml.safe_dump_all(out, sort_keys=False))
    return path


def crd_manifests(L: Layout, jobset_version: str = builds.JOBSET_VERSION,
                  kueue_version: str = builds.KUEUE_VERSION) -> Path:
    docs = []
    for who, version, ports in (("jobset", jobset_version, JOBSET_PORTS), ("kueue", kueue_version, KUEUE_PORTS)):
        crd_dir = builds.module_dir(f"sigs.k8s.io/{who}", version) / "config/components/crd"
        converted = _conversion_webhook_crds(crd_dir)
        for f in sorted((crd_dir / "bases").glob("*.yaml")):
            for d in yaml.safe_load_all(f.read_text()):
                if not d:
                    continue
                if d["metadata"]["name"] in converted and len(d["spec"].get("versions", [])) > 1:
                    # Kueue v0.15+ serves v1beta1 and v1beta2: the API server converts through the
                    # controller's /convert, reached like its other webhooks (url + caBundle)
                    d["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                        "conversionReviewVersions": ["v1"],
                        "clientConfig": {"url": f"https://127.0.0.1:{ports['webhook']}/convert",
                                         "caBundle": pki.ca_bundle_b64(pki.ensure_ca(L.pki))}}}
                docs.append(d)
    docs.extend({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                for ns in ("jobset-system", "kueue-system"))
    path = L.manifests / "crds.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def _conversion_webhook_crds(crd_dir: Path) -> set[str]:
    """CRD names the upstream kustomization gives a conversion webhook (its enabled webhook_in_* patches)."""
    kust = crd_dir / "kustomization.yaml"
    if not kust.exists():
        return set()
    names = set()
    for p in (yaml.safe_load(kust.read_text()) or {}).get("patches") or []:
        path = p.get("path", "") if isinstance(p, dict) else ""
        if Path(path).name.startswith("webhook_in_") and (crd_dir / path).exists():
            names.add(yaml.safe_load((crd_dir / path).read_text())["metadata"]["name"])
    return names


# Kueue v0.14 reads its metrics certificate from this fixed path when internal certificate
# management is off (cmd/kueue/main.go). `up` creates it (recorded, removed by `down`).
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")


def install_kueue_metrics_cert(L: Layout, state: dict, certs: dict) -> None:
    top = KUEUE_METRICS_CERT_DIR.parents[1]          # /etc/kueue
    if not top.exists():
        state.setdefault("created_paths", []).append(str(top))
        save_state(L, state)
    KUEUE_METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(certs["webhook"].cert, KUEUE_METRICS_CERT_DIR / "tls.crt")
    shutil.copyfile(certs["webhook"].key, KUEUE_METRICS_CERT_DIR / "tls.key")
    (KUEUE_METRICS_CERT_DIR / "tls.key").chmod(0o600)


