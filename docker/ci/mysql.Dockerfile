# CI stand-in for mysql:8.4, for machines with no image registry: MariaDB from Debian, behind an
# entrypoint that honours the official image's MYSQL_ROOT_PASSWORD, MYSQL_DATABASE, MYSQL_USER
# and MYSQL_PASSWORD. Tagged logcount-ci/mysql, never mysql. Built by docker/compose.ci.yaml.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends mariadb-server mariadb-client \
 && rm -rf /var/lib/apt/lists/* \
# The package initialises a data directory; the entrypoint makes its own from the variables.
 && rm -rf /var/lib/mysql && mkdir -p /var/lib/mysql /run/mysqld \
 && chown mysql:mysql /var/lib/mysql /run/mysqld
COPY docker/ci/mysql-entrypoint.sh /usr/local/bin/mysql-entrypoint.sh
EXPOSE 3306
ENTRYPOINT ["/usr/local/bin/mysql-entrypoint.sh"]
