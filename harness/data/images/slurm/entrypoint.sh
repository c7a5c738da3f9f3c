#!/bin/bash
# Entrypoint of the Slurm node image.
# Usage: poc-entrypoint slurmctld|slurmdbd|slurmd|slurmd-restart|slurmrestd|login|<cmd...>
# Secrets are bind-mounted read-only from the cluster's state dir (never baked into the image):
#   /run/poc-secrets/munge.key        shared munge key (every role)
#   /run/poc-secrets/jwt_hs256.key    JWT signing key (slurmctld, slurmdbd: they mint and check tokens)
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

install_jwt_key() {
  install -o slurm -g slurm -m 0600 "$S/jwt_hs256.key" /etc/slurm/jwt_hs256.key
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

# slurmd runs under this loop rather than as the container's main process, so it can be restarted
# (or upgraded) in place the way a site does it: stopping slurmd leaves the jobs' slurmstepd processes
# running (they are reparented to the container's init), and the new slurmd finds them again in its
# spool directory. Before, `exec slurmd` meant a slurmd exit stopped the container and killed every job
# on the node. `docker stop` (SIGTERM to the loop) stops slurmd and the container at once; `docker kill`
# (the lose_node fault) is SIGKILL to the container's init, which takes everything down as before.
SLURMD_PID=/run/poc-slurmd.pid
run_slurmd() {
  local child="" rc delay=0.2
  trap 'log "stopping"; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; exit 0' TERM INT
  while :; do
    # -N: the node's NodeName is its short host name (c1 in c1.poc.lab): the compute containers' host names are
    # FQDNs, as on many sites, so that NodeName and host name differ (docker-compose.yml)
    slurmd -D -N "$(hostname -s)" &
    child=$!
    echo "$child" > "$SLURMD_PID"
    rc=0
    wait "$child" || rc=$?
    log "slurmd (pid $child) exited with $rc; starting it again"
    sleep "$delay"
    # a slurmd that keeps failing (a bad configuration) is retried once a second, not in a tight loop
    if ((rc != 0)); then delay=1; else delay=0.2; fi
  done
}

case "$role" in
  slurmdbd)
    start_munge
    install_jwt_key
    umask 077
    {
      echo "AuthType=auth/munge"
      echo "AuthAltTypes=auth/jwt"
      echo "AuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key"
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
    install_jwt_key
    chown -R slurm:slurm /var/spool/slurmctld /var/log/slurm
    wait_tcp slurmdbd 6819 120 || true   # slurmctld queues accounting records while slurmdbd is away
    exec slurmctld -D
    ;;
  slurmd)
    start_munge
    chown poc:poc /shared 2>/dev/null || true
    run_slurmd
    ;;
  slurmd-restart)
    # The upgrade drill's in-place restart (`docker exec <node> poc-entrypoint slurmd-restart`):
    # SIGTERM makes slurmd leave its running slurmstepds alone, and run_slurmd starts it again.
    kill -TERM "$(cat "$SLURMD_PID")"
    ;;
  slurmrestd)
    # The REST API for the `rest` transport, as an unprivileged user: slurmrestd refuses root and
    # SlurmUser, and a user's JWT (X-SLURM-USER-TOKEN) decides what each request may do.
    # An unprivileged container may not unshare namespaces ("Unable to unshare System V
    # namespace: Operation not permitted"); the user check stays on.
    start_munge
    wait_tcp slurmctld 6817 120 || true
    export SLURMRESTD_SECURITY=disable_unshare_sysv,disable_unshare_files
    # Without SLURM_JWT=daemon slurmrestd hands every token to auth/munge, which rejects it
    # ("Rejecting thread config token for user poc").
    export SLURM_JWT=daemon
    exec runuser -u slurmrestd -- slurmrestd -a rest_auth/jwt 0.0.0.0:6820
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
