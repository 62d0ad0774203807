#!/bin/sh
# One-time step before `docker compose -f deploy/compose.yaml up`: writes, into
# deploy/compose/secrets/ (never committed), the CA and certificates
# (deploy/tls/generate.sh), the roles' bus signing keys, the PostgreSQL superuser
# password and the api replicas' shared session secrets. Existing files are kept.
#
# Keys are readable by their user only, so each is handed to the uid that reads it:
# orloj runs as 1000, the postgres and rabbitmq images as 999 (override with
# ORLOJ_UID, POSTGRES_UID, RABBITMQ_UID). Run as root (chown).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/secrets"
orloj_uid=${ORLOJ_UID:-1000}
postgres_uid=${POSTGRES_UID:-999}
rabbitmq_uid=${RABBITMQ_UID:-999}
umask 077
mkdir -p "$out"
"$here/../tls/generate.sh" "$out/tls" >/dev/null
"$here/../signing/generate.sh" "$out/keys"
chown "$orloj_uid" "$out"/keys/*.key
for name in session-secret csrf-hmac-secret postgres-password; do
  [ -s "$out/$name" ] || openssl rand -base64 48 | tr -d '\n' > "$out/$name"
done
chmod 755 "$out" "$out/tls"
chmod 644 "$out"/tls/*.crt
chmod 600 "$out"/tls/*.key "$out"/session-secret "$out"/csrf-hmac-secret "$out"/postgres-password
for role in api scheduler runners log-ingest notifier; do chown "$orloj_uid" "$out/tls/orloj-$role.key"; done
chown "$orloj_uid" "$out/session-secret" "$out/csrf-hmac-secret"
chown "$postgres_uid" "$out/tls/postgres.key" "$out/postgres-password"
chown "$rabbitmq_uid" "$out/tls/rabbitmq.key"
echo "compose secrets in $out"
