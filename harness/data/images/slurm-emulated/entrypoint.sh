#!/bin/bash
# Entrypoint of the emulated Slurm cluster: munged, MariaDB, slurmdbd, slurmctld, then one slurmd per
# emulated node, all in this one container. The configuration (slurm.conf, gres.conf, topology.conf,
# slurmdbd.conf) is bind-mounted read-only at /etc/slurm-poc by harness/clusters/slurm/emulated.py,
# which also sets the POC_FAKE_GPU* variables; it is copied to /etc/slurm because slurmdbd refuses a
# slurmdbd.conf that is not its SlurmUser's, mode 600, which a host's bind mount cannot promise.
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

cp /etc/slurm-poc/* /etc/slurm/

# MariaDB and slurmdbd: a fresh database per start (the container is the cluster), a fresh password
# that exists only in this container, like the munge key.
install -d -o mysql -g mysql /run/mysqld
mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null
pass=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
umask 077
cat > /run/mysqld/poc-init.sql <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '${pass}';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL
chown mysql:mysql /run/mysqld/poc-init.sql
echo "StoragePass=${pass}" >> /etc/slurm/slurmdbd.conf
chown slurm:slurm /etc/slurm/slurmdbd.conf && chmod 0600 /etc/slurm/slurmdbd.conf
umask 022
mariadbd --user=mysql --init-file=/run/mysqld/poc-init.sql >/var/log/slurm/mariadb.log 2>&1 &
for _ in $(seq 1 150); do mariadb-admin ping >/dev/null 2>&1 && break; sleep 0.2; done
mariadb-admin ping >/dev/null || { log "MariaDB did not start"; tail -n 20 /var/log/slurm/mariadb.log >&2; exit 1; }
slurmdbd
for _ in $(seq 1 150); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.2; done
sacctmgr -n list cluster >/dev/null || { log "slurmdbd did not answer"; tail -n 20 /var/log/slurm/slurmdbd.log >&2; exit 1; }
# the cluster's root association: root's jobs (no --account) run under it when associations are enforced
sacctmgr -i add cluster "$(sed -n 's/^ClusterName=//p' /etc/slurm/slurm.conf)" >/dev/null
log "slurmdbd up"

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
