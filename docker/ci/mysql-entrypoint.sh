#!/bin/bash
# The official mysql image's start-up: on an empty data directory, initialise it, start a server
# that listens on no port (so a healthcheck cannot pass early), set root's password for localhost
# and '%', create MYSQL_DATABASE (and MYSQL_USER), then start for real. Each server prints "ready
# for connections", as the official image's do (testcontainers waits for both).
set -euo pipefail
if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then exec "$@"; fi  # a command, e.g. the reader's sh
: "${MYSQL_ROOT_PASSWORD:?set MYSQL_ROOT_PASSWORD}"
q() { printf "%s" "${1//\'/\'\'}"; }  # a value inside '...' in SQL
datadir=/var/lib/mysql
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld "$datadir"
if [ ! -d "$datadir/mysql" ]; then
  mysqld --initialize-insecure --user=mysql --datadir="$datadir"
  sock=/run/mysqld/init.sock
  mysqld --user=mysql --datadir="$datadir" --skip-networking --socket="$sock" --mysqlx=OFF &
  pid=$!
  for _ in $(seq 120); do mysqladmin --socket="$sock" -uroot ping > /dev/null 2>&1 && break; sleep 0.5; done
  {
    echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$(q "$MYSQL_ROOT_PASSWORD")';"
    echo "CREATE USER 'root'@'%' IDENTIFIED BY '$(q "$MYSQL_ROOT_PASSWORD")';"
    echo "GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;"
    if [ -n "${MYSQL_DATABASE:-}" ]; then
      echo "CREATE DATABASE IF NOT EXISTS \`${MYSQL_DATABASE}\`;"
    fi
    if [ -n "${MYSQL_USER:-}" ] && [ "$MYSQL_USER" != root ]; then
      echo "CREATE USER '$(q "$MYSQL_USER")'@'%' IDENTIFIED BY '$(q "${MYSQL_PASSWORD:-}")';"
      [ -n "${MYSQL_DATABASE:-}" ] && echo "GRANT ALL ON \`${MYSQL_DATABASE}\`.* TO '$(q "$MYSQL_USER")'@'%';"
    fi
  } | mysql --socket="$sock" -uroot
  kill "$pid" && wait "$pid" || true
fi
exec mysqld --user=mysql --datadir="$datadir" --bind-address=0.0.0.0 --port=3306
