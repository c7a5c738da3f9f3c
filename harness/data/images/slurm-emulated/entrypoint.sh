#!/bin/bash
# Entrypoint of the emulated Slurm cluster: munged, slurmctld, then one slurmd per emulated node,
# all in this one container. /etc/slurm (slurm.conf, gres.conf, topology.conf) is bind-mounted
# read-only by harness/clusters/slurm/emulated.py, which also sets the POC_FAKE_GPU* variables.
# Usage: poc-emulated NODELIST   (a Slurm host list, e.g. e[0001-0064])
set -euo pipefail
nodes="${1:?usage: poc-emulated NODELIST}"
log() { echo "[poc-emulated] $*" >&2; }

# One container holds every daemon, so its munge key never leaves it: a fresh key per start.
install -d -o munge -g munge -m 0700 /etc/munge
dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
su -s /bin/sh munge -c "/usr/sbin/munged --force"

# The GPUs gres.conf names: character devices, as on a GPU node (a plain file makes slurmd log an
# error per GPU and node); shared by every emulated node, and never opened.
gpus="${POC_FAKE_GPUS:-0}" gpu_dir="${POC_FAKE_GPU_DIR:-/dev/fakegpu}" major="${POC_FAKE_GPU_MAJOR:-195}"
mkdir -p "$gpu_dir"
for ((g = 0; g < gpus; g++)); do mknod -m 0666 "$gpu_dir/nvidia$g" c "$major" "$g"; done

slurmctld
for _ in $(seq 1 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
log "slurmctld up; starting slurmd for ${nodes}"
# slurmd daemonizes itself; each reads its own node's Port and %n-expanded spool, pid and log paths.
hosts=$(scontrol show hostnames "$nodes")
for n in $hosts; do
  # slurmd makes its spool only after it has tried to open the step socket there (an error in its log)
  mkdir -p "/var/spool/slurmd/$n"
  slurmd -N "$n"
done
log "started $(wc -w <<<"$hosts") slurmd"
trap 'log stopping; exit 0' TERM INT
sleep infinity & wait $!
