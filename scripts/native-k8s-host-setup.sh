#!/bin/sh
# Host packages and kernel settings the native Kubernetes provider needs (Debian 12, as root).
# Docker itself (docker.io, dockerd running) is set up elsewhere in .ci/run; it builds the pause
# and test images and is where worker images are taken from.
# Go >= 1.24 must be on PATH or at /usr/local/go/bin/go.
set -eu
export DEBIAN_FRONTEND=noninteractive
need=""
for p in containerd runc containernetworking-plugins iptables iproute2 busybox-static; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  apt-get update -q
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $need
fi
# pods on different node bridges are routed through the host
sysctl -q -w net.ipv4.ip_forward=1
# Debian's containerd package enables a system containerd service; the native cluster runs its
# own per-node containerds and does not need it (it is harmless if it runs).
