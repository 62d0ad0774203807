#!/bin/sh
# Generates the bus signing keys of the distributed topology, once, into <outdir>:
# an Ed25519 pair per role (docs/operations.md, "Keys"), <role>.key (mode 0600) and
# public/<role>.pub, for api, scheduler, runners, log-ingest and notifier. Give every
# process all public keys and only its own private key. Existing keys are kept.
#
# Usage: deploy/signing/generate.sh <outdir>
set -eu
if [ $# -ne 1 ]; then
  echo "usage: $0 <outdir>" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "$0: openssl is required" >&2; exit 1; }
out=$1
umask 077
mkdir -p "$out/public"
for role in api scheduler runners log-ingest notifier; do
  if [ ! -s "$out/$role.key" ]; then
    openssl genpkey -algorithm ed25519 -out "$out/$role.key"
    openssl pkey -in "$out/$role.key" -pubout -out "$out/public/$role.pub"
  fi
done
chmod 755 "$out" "$out/public"
chmod 644 "$out"/public/*.pub
chmod 600 "$out"/*.key
