#!/bin/bash
# Starts MariaDB for slurmdbd. The password comes from /run/poc-secrets/db.pass (bind-mounted
# read-only from the cluster's state dir). The init file runs at every start and is idempotent.
set -euo pipefail
install -d -o mysql -g mysql /run/mysqld
if [ ! -d /var/lib/mysql/mysql ]; then
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null
fi
chown -R mysql:mysql /var/lib/mysql
umask 077
pass="$(cat /run/poc-secrets/db.pass)"
cat > /run/mysqld/poc-init.sql <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'%' IDENTIFIED BY '${pass}';
ALTER USER 'slurm'@'%' IDENTIFIED BY '${pass}';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%';
FLUSH PRIVILEGES;
SQL
chown mysql:mysql /run/mysqld/poc-init.sql
exec mariadbd --user=mysql --init-file=/run/mysqld/poc-init.sql
