#!/usr/bin/env bash
# Installs what the smoke POC and the tests need on a Debian 12 machine (as root), idempotently:
# Debian packages, a Docker engine, and a Python virtualenv with the project.
# Builds and downloads are cached outside the checkout ($POC_CACHE_DIR), keyed by version,
# so a second run takes seconds. The virtualenv is linked as ./.venv.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache=${POC_CACHE_DIR:-$HOME/.cache/k8s-slurm-poc}
mkdir -p "$cache/wheels" /var/log/poc
log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# --- Debian packages -------------------------------------------------------------------------
pkgs=(docker.io debootstrap containerd runc iptables iproute2 containernetworking-plugins
      conntrack socat ethtool kmod openssl ca-certificates util-linux psmisc procps
      chromium fonts-dejavu-core busybox-static zsh tcsh)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  # DEBCONF_NOWARNINGS: debconf's "delaying package configuration, since apt-utils is not installed"
  DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- Docker engine (no systemd here: start dockerd by hand, log to a file) -------------------
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  (setsid nohup dockerd >/var/log/poc/dockerd.log 2>&1 &)
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "ERROR dockerd did not start; see /var/log/poc/dockerd.log" >&2; exit 1; }
fi

# --- Python virtualenv, keyed by the dependency list and the extras installed ----------------
py=${PYTHON:-python3}
# dev: the tests' tools; workload: torch, for local.runtime: host and the tests that run the workload here
# (a plain `pip install k8s-slurm-poc` is the light client, without either)
extras="dev,workload"
# setuptools notes on every editable install that a folder named like the package may shadow it:
# information, not a problem, and pip shows a local folder's build warnings even with -q.
pip_install() { PYTHONWARNINGS="ignore:Editable installation" "$venv/bin/pip" install -q "$@"; }
key=$( (cat "$here/pyproject.toml"; echo "$extras"; $py --version) | sha256sum | cut -c1-12)
venv="$cache/venv-$key"
if [ ! -x "$venv/bin/poc" ] || [ ! -f "$venv/.complete" ]; then
  log "creating $venv"
  rm -rf "$venv"
  $py -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  torch_req=$(grep -oE '"torch[^"]*"' "$here/pyproject.toml" | tr -d '"')
  # torch is 4+ GB with its CUDA libraries: keep the wheels, so a new venv installs offline.
  "$venv/bin/pip" download -q -d "$cache/wheels" "$torch_req"
  pip_install --find-links "$cache/wheels" -e "$here[$extras]"
  touch "$venv/.complete"
else
  pip_install --no-deps --no-build-isolation -e "$here" 2>/dev/null \
    || pip_install --find-links "$cache/wheels" -e "$here[$extras]"
fi
ln -sfn "$venv" "$here/.venv"
log "ready: $here/.venv ($("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
