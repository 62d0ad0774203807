#!/bin/sh
# Generates the certificates of orloj's mutual TLS, once, into <outdir>:
#
#   ca.crt, ca.key                 a private certificate authority (keep ca.key offline)
#   rabbitmq.crt/.key              the broker's server certificate
#   postgres.crt/.key              the database's server certificate
#   orloj-<role>.crt/.key          one client certificate per role, CN orloj-<role>,
#                                  for api, scheduler, runners, log-ingest, notifier
#
# Server certificates name the service (rabbitmq, postgres), localhost and
# 127.0.0.1, plus any extra names given in ORLOJ_TLS_EXTRA_SANS (comma-separated
# openssl SAN entries such as "DNS:mq.example.com,IP:10.0.0.5"). The client CN
# is the identity: the broker logs the process in as that user (EXTERNAL) and
# PostgreSQL maps it to the database role of the same name (hostssl ... cert).
#
# Usage: deploy/tls/generate.sh <outdir>     (ORLOJ_TLS_DAYS, default 825)
# Existing files are kept, so rerunning adds only what is missing; delete the
# directory to start over. See deploy/README.md, "Certificates".
set -eu

if [ $# -ne 1 ]; then
  echo "usage: $0 <outdir>" >&2
  exit 2
fi
out=$1
days=${ORLOJ_TLS_DAYS:-825}
extra=${ORLOJ_TLS_EXTRA_SANS:-}
command -v openssl >/dev/null || { echo "$0: openssl is required" >&2; exit 1; }

umask 077
mkdir -p "$out"
cd "$out"

key() { # <name>: a private key, readable by its owner only
  [ -f "$1.key" ] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1.key" 2>/dev/null
}

if [ ! -f ca.crt ]; then
  key ca
  openssl req -x509 -new -key ca.key -sha256 -days "$days" -subj "/CN=orloj CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out ca.crt
fi

sign() { # <name> <cn> <extensions>
  [ -f "$1.crt" ] && return 0
  key "$1"
  ext=$(mktemp)
  printf '%s\n' "$3" > "$ext"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days "$days" \
    -extfile "$ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$ext"
}

for server in rabbitmq postgres; do
  sans="DNS:$server,DNS:localhost,IP:127.0.0.1"
  [ -z "$extra" ] || sans="$sans,$extra"
  sign "$server" "$server" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$sans"
done

for role in api scheduler runners log-ingest notifier; do
  sign "orloj-$role" "orloj-$role" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
done

rm -f ca.srl
# Certificates are public; keys stay 0600 (PostgreSQL refuses a group- or world-readable key).
chmod 644 ./*.crt
chmod 600 ./*.key
echo "certificates in $(pwd): ca.crt, rabbitmq, postgres, orloj-{api,scheduler,runners,log-ingest,notifier}"
