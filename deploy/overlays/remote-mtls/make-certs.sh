#!/usr/bin/env bash
# Makes the certificates this overlay's Secrets are generated from, in certs/ beside this file
# (or DIR): a CA (ca.crt, ca.key: keep the key out of the cluster), the plugin's serving
# certificate for webapp-plugin.ctrlhost.svc (plugin.crt/.key) and the host's client certificate
# (host.crt/.key). EC P-256, valid DAYS (default 365) days. Use your own PKI (cert-manager, ...)
# in production: the overlay only needs the five files.
#
#   deploy/overlays/remote-mtls/make-certs.sh [DIR] && kubectl apply -k deploy/overlays/remote-mtls
set -euo pipefail
dir=${1:-$(dirname "$0")/certs}
days=${DAYS:-365}
mkdir -p "$dir"
cd "$dir"
umask 077
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1"; }
key ca.key
openssl req -x509 -new -key ca.key -days "$days" -subj /CN=ctrlhost-plugin-ca -out ca.crt
issue() {  # NAME CN EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
  printf '%b' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
issue plugin webapp-plugin.ctrlhost.svc \
  'subjectAltName=DNS:webapp-plugin.ctrlhost.svc,DNS:webapp-plugin.ctrlhost.svc.cluster.local\nextendedKeyUsage=serverAuth\n'
issue host ctrlhost 'extendedKeyUsage=clientAuth\n'
rm -f ca.srl
chmod 0644 ca.crt plugin.crt host.crt
echo "certificates in $(pwd): ca.crt plugin.crt plugin.key host.crt host.key (ca.key: keep it safe)"
