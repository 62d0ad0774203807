#!/bin/sh
# One-time step before `kubectl apply -k deploy/kubernetes/overlays/<topology>`: writes
# the secrets the kustomizations read, never committed (.gitignore):
#   base/secrets/session-secret, csrf-hmac-secret      random, 48 bytes base64
#   overlays/distributed/secrets/tls/                  deploy/tls/generate.sh output
#   overlays/distributed/secrets/keys/                 bus signing keys, one pair per role
# Existing files are kept. Usage: deploy/kubernetes/make-secrets.sh [<kubernetes dir>]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here}
umask 077
mkdir -p "$dir/base/secrets"
for name in session-secret csrf-hmac-secret; do
  f="$dir/base/secrets/$name"
  [ -s "$f" ] || openssl rand -base64 48 | tr -d '\n' > "$f"
done
"$here/../tls/generate.sh" "$dir/overlays/distributed/secrets/tls" >/dev/null
# Bus signing keys, one Ed25519 pair per role (docs/operations.md, "Keys").
"$here/../signing/generate.sh" "$dir/overlays/distributed/secrets/keys"
echo "secrets in $dir/base/secrets and $dir/overlays/distributed/secrets"
