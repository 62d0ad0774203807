#!/bin/bash
# Test only: starts Debian's PostgreSQL, RabbitMQ or nginx the way their official
# images do, so deploy/compose.yaml runs unchanged apart from the image. First argument:
# postgres | rabbitmq-server | nginx, then the compose command's arguments.
set -euo pipefail
what=$1
shift
case "$what" in
  postgres)
    # The official postgres image: initdb on an empty volume with the superuser password
    # from POSTGRES_PASSWORD_FILE, create POSTGRES_DB unless it is "postgres", run
    # /docker-entrypoint-initdb.d/*.sql against it.
    export PGDATA=${PGDATA:-/var/lib/postgresql/data}
    mkdir -p "$PGDATA" /run/postgresql
    chown -R postgres:postgres "$PGDATA" /run/postgresql
    chmod 700 "$PGDATA"
    as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
    if [ ! -s "$PGDATA/PG_VERSION" ]; then
      pw=$(mktemp) && cp "$POSTGRES_PASSWORD_FILE" "$pw" && chown postgres "$pw"
      as_pg initdb -U "${POSTGRES_USER:-postgres}" --pwfile="$pw" --auth-local=peer --auth-host=scram-sha-256 >/dev/null
      rm -f "$pw"
      as_pg pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
      db=${POSTGRES_DB:-${POSTGRES_USER:-postgres}}
      if [ "$db" != postgres ]; then
        as_pg psql -v ON_ERROR_STOP=1 -U postgres -d postgres -c "CREATE DATABASE \"$db\"" >/dev/null
      fi
      for f in /docker-entrypoint-initdb.d/*.sql; do
        [ -e "$f" ] && as_pg psql -v ON_ERROR_STOP=1 -U postgres -d "$db" -f "$f" >/dev/null
      done
      as_pg pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    fi
    [ "${1:-}" = postgres ] && shift
    exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" -c listen_addresses='*' "$@"
    ;;
  rabbitmq-server)
    chown -R rabbitmq:rabbitmq /var/lib/rabbitmq
    export HOME=/var/lib/rabbitmq RABBITMQ_LOGS=- RABBITMQ_ENABLED_PLUGINS_FILE=/etc/rabbitmq/enabled_plugins
    exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups /usr/lib/rabbitmq/bin/rabbitmq-server
    ;;
  nginx)
    exec nginx -g 'daemon off;'
    ;;
  *)
    echo "unknown service $what" >&2
    exit 2
    ;;
esac
