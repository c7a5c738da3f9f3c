"""How long each platform keeps each record an audit answer comes from, by default, and the setting
that changes it. Checked against the upstream documentation (docs/audit.md cites each); the
Kubernetes flag defaults were also read from `kube-apiserver --help` of the native cluster's v1.34.4
build, the Slurm ones from the slurm.conf(5)/slurmdbd.conf(5) man pages of Slurm 24.11.5 in the
local cluster's image."""
from __future__ import annotations

# source name (the answers' sources start with or contain one) -> platform, default, setting, reference
SOURCES: dict[str, dict[str, str]] = {
    # ---- Slurm
    "sacct (slurmdbd)": {
        "platform": "slurm",
        "default": "forever: job and step records are never purged unless a purge time is set",
        "setting": "slurmdbd.conf PurgeJobAfter / PurgeStepAfter (optionally ArchiveJobs/ArchiveSteps)",
        "cite": "https://slurm.schedmd.com/slurmdbd.conf.html#OPT_PurgeJobAfter"},
    "sacct --batch-script (slurmdbd)": {
        "platform": "slurm",
        "default": "not kept at all unless slurm.conf AccountingStoreFlags has job_script (the local cluster "
                   "sets it); then as long as the job record",
        "setting": "slurm.conf AccountingStoreFlags=job_script; slurmdbd.conf PurgeJobAfter",
        "cite": "https://slurm.schedmd.com/slurm.conf.html#OPT_AccountingStoreFlags"},
    "slurmctld log": {
        "platform": "slurm",
        "default": "until the site rotates or deletes it (Slurm does not rotate it; readable by SlurmUser/root only)",
        "setting": "slurm.conf SlurmctldLogFile, SlurmctldDebug; the site's logrotate",
        "cite": "https://slurm.schedmd.com/slurm.conf.html#OPT_SlurmctldLogFile"},
    "slurmctld memory (squeue/scontrol)": {
        "platform": "slurm",
        "default": "300 s after the job ends",
        "setting": "slurm.conf MinJobAge",
        "cite": "https://slurm.schedmd.com/slurm.conf.html#OPT_MinJobAge"},
    # ---- Kubernetes
    "API server audit log": {
        "platform": "k8s",
        "default": "off unless kube-apiserver has an audit policy and backend; a log file is then kept with no age "
                   "or count limit unless set (the native cluster: 7 days, 5 x 100 MB); managed clusters: the "
                   "provider's log retention",
        "setting": "kube-apiserver --audit-policy-file, --audit-log-path, --audit-log-maxage/-maxbackup/-maxsize",
        "cite": "https://kubernetes.io/docs/tasks/debug/debug-cluster/audit/"},
    "Events": {
        "platform": "k8s",
        "default": "1 h after the event was last recorded",
        "setting": "kube-apiserver --event-ttl (default 1h0m0s)",
        "cite": "https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/"},
    "JobSet object": {
        "platform": "k8s",
        "default": "until deleted (the harness deletes it at cancel); a finished JobSet stays unless "
                   "spec.ttlSecondsAfterFinished is set",
        "setting": "JobSet spec.ttlSecondsAfterFinished",
        "cite": "https://github.com/kubernetes-sigs/jobset/blob/v0.10.1/api/jobset/v1alpha2/jobset_types.go"},
    "Kueue Workload": {
        "platform": "k8s",
        "default": "deleted with its JobSet (owner reference, garbage collection)",
        "setting": "the JobSet's lifetime; Kueue Configuration objectRetentionPolicies.workloads.afterFinished "
                   "(unset by default: no deletion of its own)",
        "cite": "https://github.com/kubernetes-sigs/kueue/blob/v0.14.5/apis/config/v1beta1/configuration_types.go"},
    "Pod objects": {
        "platform": "k8s",
        "default": "deleted with their Job and JobSet (garbage collection); their logs go with them",
        "setting": "the JobSet's lifetime; kube-controller-manager --terminated-pod-gc-threshold (12500) for "
                   "pods left behind",
        "cite": "https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-garbage-collection"},
}


# source -> "default retention (setting: what changes it)": what the report shows beside each answer
RETENTION: dict[str, str] = {k: f"{v['default']} (setting: {v['setting']})" for k, v in SOURCES.items()}


def sources(source: str) -> list[str]:
    """The sources an answer's source text names (a source may combine several, "A; B")."""
    return [k for k in SOURCES if k in source]
