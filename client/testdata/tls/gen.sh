#!/usr/bin/env bash
# Regenerates the TLS test fixtures of the client SDKs' tests (never used outside tests): a CA,
# a server certificate for localhost and 127.0.0.1, and a client certificate for mutual TLS,
# each valid for 100 years. Needs openssl.
#
#   client/testdata/tls/gen.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
DAYS=36500
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key
openssl req -x509 -new -key ca.key -sha256 -days "$DAYS" -subj "/CN=Frontdesk Test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.pem

# leaf NAME SUBJECT EXTENSIONS: a key and a certificate signed by the CA.
leaf() {
  local name="$1" subject="$2" ext="$3"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$name.key"
  openssl req -new -key "$name.key" -subj "$subject" -out "$TMP/$name.csr"
  printf '%b' "$ext" > "$TMP/$name.ext"
  openssl x509 -req -in "$TMP/$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -CAserial "$TMP/ca.srl" \
    -days "$DAYS" -sha256 -extfile "$TMP/$name.ext" -out "$name.pem"
}
leaf server "/CN=localhost" \
  "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
leaf client "/CN=frontdesk-test-client" \
  "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n"
rm -f ca.key
