# CI stand-in for mysql:8.4, for machines with no image registry: Oracle's MySQL as Debian sid
# packages it (scripts/docker-demo.sh builds the base with mmdebstrap), behind an entrypoint that
# honours the official image's MYSQL_ROOT_PASSWORD, MYSQL_DATABASE, MYSQL_USER and
# MYSQL_PASSWORD. Tagged logcount-ci/mysql, never mysql. Built by docker/compose.ci.yaml.
ARG BASE=logcount-ci/debian:sid-mysql
FROM ${BASE}
# The entrypoint makes the data directory from the variables. Debian's config sends the server's
# log to a file; without log_error it goes to stderr, as the official image's does (docker logs,
# and testcontainers waits there for "ready for connections"). The package moves server and
# clients to 3307 when 3306 was taken on the machine that built the base (a MariaDB there):
# inside the container it is always 3306, as in the official image.
RUN rm -rf /var/lib/mysql && mkdir -p /var/lib/mysql /run/mysqld \
 && chown mysql:mysql /var/lib/mysql /run/mysqld \
 && sed -i '/^log_error/d' /etc/mysql/mysql.conf.d/mysqld.cnf \
 && rm -f /etc/mysql/mysql.conf.d/99-port-backoff.cnf
COPY docker/ci/mysql-entrypoint.sh /usr/local/bin/mysql-entrypoint.sh
EXPOSE 3306
ENTRYPOINT ["/usr/local/bin/mysql-entrypoint.sh"]
