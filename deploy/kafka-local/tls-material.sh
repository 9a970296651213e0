# shellcheck shell=bash
# TLS material for the secured broker (KAFKA_LOCAL_SECURITY=sasl_ssl), made with openssl and
# keytool into one folder: a self-signed CA, the server's certificate (127.0.0.1, localhost)
# in a PKCS#12 keystore, a truststore holding the CA, a client certificate the SSL
# listener accepts, and one that expired (for the negative test). Sourced by kafka-local.
#
#   make_tls_material DIR STORE_PASSWORD
#
# Files in DIR: ca.crt ca.key server.p12 truststore.p12 client.crt client.key
# client-expired.crt client-expired.key (PEM keys are unencrypted PKCS#8: test material).
make_tls_material() {
  local dir="$1" pass="$2" tmp="$1.tmp"
  command -v openssl >/dev/null || fail "openssl is needed to make the secured broker's certificates"
  command -v keytool >/dev/null || fail "keytool (from the JDK) is needed to make the broker's truststore"
  rm -rf "$tmp" && mkdir -p "$tmp"
  (
    cd "$tmp"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
      -subj "/CN=kafka-local test CA" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign"
    sign() { # sign NAME DAYS SUBJECT EXTENSIONS
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$3"
      printf '%s\n' "$4" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" \
        -days "$2" -extfile "$1.ext"
    }
    sign server 30 "/CN=localhost" "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
    sign client 30 "/CN=kafka-lance-client" "extendedKeyUsage=clientAuth"
    # -days -1: notAfter is before now, an expired certificate from its first second.
    sign client-expired -1 "/CN=kafka-lance-expired" "extendedKeyUsage=clientAuth"
    openssl pkcs12 -export -in server.crt -inkey server.key -certfile ca.crt -name server \
      -out server.p12 -passout "pass:$pass"
    keytool -importcert -noprompt -alias ca -file ca.crt -keystore truststore.p12 \
      -storetype PKCS12 -storepass "$pass"
    rm -f ./*.csr ./*.ext ca.srl
  ) >"$tmp.out" 2>&1 || { cat "$tmp.out" >&2; fail "making the TLS material failed (log: $tmp.out)"; }
  rm -rf "$dir" && mv "$tmp" "$dir" && rm -f "$tmp.out"
}
