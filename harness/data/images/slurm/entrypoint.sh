#!/bin/bash
# Entrypoint of the Slurm node image. Usage: poc-entrypoint slurmctld|slurmdbd|slurmd|login|<cmd...>
# Secrets are bind-mounted read-only from the cluster's state dir (never baked into the image):
#   /run/poc-secrets/munge.key        shared munge key (every role)
#   /run/poc-secrets/db.pass          MariaDB password (slurmdbd)
#   /run/poc-secrets/ssh_host_ed25519_key{,.pub}, authorized_keys   (login)
set -euo pipefail
role="${1:-slurmd}"
S=/run/poc-secrets

log() { echo "[poc-entrypoint $(hostname) $role] $*" >&2; }

start_munge() {
  install -o munge -g munge -m 0400 "$S/munge.key" /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  su -s /bin/sh munge -c "/usr/sbin/munged --force"
}

wait_tcp() {  # host port seconds
  local i
  for ((i = 0; i < $3; i++)); do
    if nc -z -w 1 "$1" "$2" 2>/dev/null; then return 0; fi
    sleep 1
  done
  log "timed out waiting for $1:$2"
  return 1
}

case "$role" in
  slurmdbd)
    start_munge
    umask 077
    {
      echo "AuthType=auth/munge"
      echo "DbdHost=slurmdbd"
      echo "SlurmUser=slurm"
      echo "StorageType=accounting_storage/mysql"
      echo "StorageHost=mariadb"
      echo "StoragePort=3306"
      echo "StorageUser=slurm"
      echo "StoragePass=$(cat "$S/db.pass")"
      echo "StorageLoc=slurm_acct_db"
      echo "LogFile=/var/log/slurm/slurmdbd.log"
      echo "PidFile=/run/slurmdbd.pid"
    } > /etc/slurm/slurmdbd.conf
    chown slurm:slurm /etc/slurm/slurmdbd.conf
    chmod 600 /etc/slurm/slurmdbd.conf
    wait_tcp mariadb 3306 120
    exec slurmdbd -D
    ;;
  slurmctld)
    start_munge
    chown -R slurm:slurm /var/spool/slurmctld /var/log/slurm
    wait_tcp slurmdbd 6819 120 || true   # slurmctld queues accounting records while slurmdbd is away
    exec slurmctld -D
    ;;
  slurmd)
    start_munge
    chown poc:poc /shared 2>/dev/null || true
    exec slurmd -D -N "$(hostname)"
    ;;
  login)
    start_munge
    install -m 0600 "$S/ssh_host_ed25519_key" /etc/ssh/ssh_host_ed25519_key
    install -m 0644 "$S/ssh_host_ed25519_key.pub" /etc/ssh/ssh_host_ed25519_key.pub
    install -d -o poc -g poc -m 0700 /home/poc/.ssh
    install -o poc -g poc -m 0600 "$S/authorized_keys" /home/poc/.ssh/authorized_keys
    chown poc:poc /shared
    exec /usr/sbin/sshd -D -e
    ;;
  *)
    exec "$@"
    ;;
esac
