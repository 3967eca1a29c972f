# The `secure` profile of the local stack (AGENTRUN_STACK_PROFILE=secure), sourced by stack.sh.
#
# Same servers, same ports, secured the way a customer's clusters are:
#   - a private CA and certificates, generated once under .stack/secure/ (kept across `down`);
#   - Kafka: one SASL_SSL listener (SCRAM-SHA-512), the plaintext listener off, StandardAuthorizer with
#     deny by default, one principal per platform service with exactly the ACLs it needs, and `outside`;
#   - Postgres: TLS only over TCP (scram-sha-256); the superuser's unix socket stays for setup;
#   - Temporal: the dev server (no TLS flags of its own) on a loopback port behind nginx, which
#     terminates TLS, requires a client certificate from the CA and passes gRPC on.
# The settings clients need are written to .stack/secure/ (client.properties, platform.env, env/, admin.env).
# Everything here only defines functions and paths; stack.sh decides when to call them.

SECURE_DIR="$STACK_DIR/secure"
SECURE_PASSWORDS="$SECURE_DIR/passwords"
SECURE_CA_CERT="$SECURE_DIR/ca.crt"
SECURE_CA_KEY="$SECURE_DIR/ca.key"
SECURE_SERVER_CERT="$SECURE_DIR/server.crt"
SECURE_SERVER_KEY="$SECURE_DIR/server.key"
SECURE_KAFKA_KEYSTORE="$SECURE_DIR/kafka/server.pem" # key + certificate: Kafka's PEM keystore form
SECURE_KAFKA_ADMIN_PROPS="$SECURE_DIR/kafka/admin.properties"
SECURE_PG_KEY="$SECURE_DIR/postgres/server.key" # a copy the postgres OS user owns, as Postgres insists
SECURE_TEMPORAL_CLIENT_CERT="$SECURE_DIR/clients/platform.crt"
SECURE_TEMPORAL_CLIENT_KEY="$SECURE_DIR/clients/platform.key"
SECURE_KAFKA_SPEC="$CONF_DIR/kafka/security.spec"
PG_HBA_SECURE="$CONF_DIR/postgres/pg_hba.secure.conf"
NGINX_CONF="$CONF_DIR/nginx/nginx.conf"
NGINX_RUN="$RUN_DIR/nginx"

# Kafka principals: the stack's super user, one per platform service that uses Kafka, the outside
# client, and the controller listener's own (SASL PLAIN: SCRAM cannot guard a KRaft controller).
KAFKA_ADMIN_USER="admin"
KAFKA_CONTROLLER_USER="kraft"
KAFKA_OUTSIDE_USER="outside"
KAFKA_OUTSIDE_GROUP_PREFIX="outside-"
KAFKA_SERVICE_USERS="agentrun-gateway agentrun-orchestrator agentrun-projector agentrun-gpu-worker"
PLATFORM_SERVICES="gateway orchestrator projector gpu-worker snapshotter"

SECURE_GENERATED=0

secure_password_file() { printf '%s/%s' "$SECURE_PASSWORDS" "$1"; }
secure_password() { cat "$(secure_password_file "$1")"; }

# Writes STDIN to FILE (mode 0600) through a temporary file, so a reader never sees half a file.
secure_write() { # FILE
  local tmp="$1.tmp.$$"
  (umask 077 && cat >"$tmp")
  mv -f "$tmp" "$1"
}

secure_new_password() { # NAME: once; kept across restarts
  local f
  f="$(secure_password_file "$1")"
  [ -s "$f" ] && return 0
  openssl rand -hex 24 | secure_write "$f"
}

# One openssl config for every certificate: what each kind may be used for.
secure_openssl_config() {
  cat <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
}

secure_issue() { # KIND(server|client) CN CERT KEY
  local kind="$1" cn="$2" cert="$3" key="$4" cnf csr
  cnf="$SECURE_DIR/.openssl.cnf"
  csr="$cert.csr"
  (umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$key.tmp" 2>/dev/null) &&
    openssl req -new -key "$key.tmp" -subj "/CN=$cn" -config "$cnf" -out "$csr" &&
    openssl x509 -req -in "$csr" -CA "$SECURE_CA_CERT" -CAkey "$SECURE_CA_KEY" -set_serial "0x$(openssl rand -hex 16)" \
      -days 825 -extfile "$cnf" -extensions "$kind" -out "$cert.tmp" 2>/dev/null ||
    die "secure: could not issue the $kind certificate $cert"
  mv -f "$key.tmp" "$key"
  mv -f "$cert.tmp" "$cert"
  rm -f "$csr"
}

# Certificates still valid for a day are kept; the CA lasts ten years.
secure_cert_fresh() { [ -s "$1" ] && [ -s "$2" ] && openssl x509 -checkend 86400 -noout -in "$1" >/dev/null 2>&1; }

secure_generate() {
  command -v openssl >/dev/null 2>&1 || debian_install openssl
  mkdir -p "$SECURE_DIR" "$SECURE_PASSWORDS" "$SECURE_DIR/clients" "$SECURE_DIR/kafka" "$SECURE_DIR/postgres" "$SECURE_DIR/env"
  # Traversable so the postgres user reaches its key copy; every secret itself is 0600.
  chmod 755 "$SECURE_DIR" "$SECURE_DIR/postgres"
  chmod 700 "$SECURE_PASSWORDS" "$SECURE_DIR/kafka" "$SECURE_DIR/clients"
  secure_openssl_config >"$SECURE_DIR/.openssl.cnf"
  if ! secure_cert_fresh "$SECURE_CA_CERT" "$SECURE_CA_KEY"; then
    say "secure: generating a private CA in $SECURE_DIR"
    (umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$SECURE_CA_KEY" 2>/dev/null) &&
      openssl req -new -x509 -key "$SECURE_CA_KEY" -subj "/CN=AgentRun local stack CA" -days 3650 \
        -config "$SECURE_DIR/.openssl.cnf" -extensions ca -out "$SECURE_CA_CERT" ||
      die "secure: could not create the CA"
    rm -f "$SECURE_SERVER_CERT" "$SECURE_TEMPORAL_CLIENT_CERT" # issued by the old CA
    SECURE_GENERATED=1
  fi
  if ! secure_cert_fresh "$SECURE_SERVER_CERT" "$SECURE_SERVER_KEY"; then
    say "secure: issuing the server certificate (127.0.0.1, localhost)"
    secure_issue server localhost "$SECURE_SERVER_CERT" "$SECURE_SERVER_KEY"
    SECURE_GENERATED=1
  fi
  if ! secure_cert_fresh "$SECURE_TEMPORAL_CLIENT_CERT" "$SECURE_TEMPORAL_CLIENT_KEY"; then
    say "secure: issuing the platform's Temporal client certificate"
    secure_issue client agentrun-platform "$SECURE_TEMPORAL_CLIENT_CERT" "$SECURE_TEMPORAL_CLIENT_KEY"
    SECURE_GENERATED=1
  fi
  chmod 644 "$SECURE_CA_CERT" "$SECURE_SERVER_CERT" "$SECURE_TEMPORAL_CLIENT_CERT"
  cat "$SECURE_SERVER_KEY" "$SECURE_SERVER_CERT" | secure_write "$SECURE_KAFKA_KEYSTORE"
  # The broker's own users live in its storage: new passwords would lock the stack out of it.
  if [ ! -s "$(secure_password_file "$KAFKA_ADMIN_USER")" ] && [ -f "$KAFKA_DATA/logs/meta.properties" ]; then
    die "secure: $KAFKA_DATA was formatted with the passwords of an earlier .stack/secure; remove that directory (its topics go with it) or bring the old .stack/secure back"
  fi
  local u
  for u in "$KAFKA_ADMIN_USER" "$KAFKA_CONTROLLER_USER" "$KAFKA_OUTSIDE_USER" $KAFKA_SERVICE_USERS postgres; do
    secure_new_password "$u"
  done
}

# ---------------------------------------------------------------------------------------------
# Kafka
# ---------------------------------------------------------------------------------------------
secure_kafka_write_config() {
  local admin_pw kraft_pw
  admin_pw="$(secure_password "$KAFKA_ADMIN_USER")"
  kraft_pw="$(secure_password "$KAFKA_CONTROLLER_USER")"
  mkdir -p "$CONF_DIR/kafka" "$KAFKA_DATA/logs"
  # Holds the admin and controller passwords, so 0600 like the password files.
  { kafka_node_config && kafka_storage_config; } | secure_write "$KAFKA_PROPS"
  cat >>"$KAFKA_PROPS" <<EOF
# --- secure profile ---
listeners=SASL_SSL://127.0.0.1:${KAFKA_PORT},CONTROLLER://127.0.0.1:${KAFKA_CONTROLLER_PORT}
advertised.listeners=SASL_SSL://127.0.0.1:${KAFKA_PORT}
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${KAFKA_ADMIN_USER}" password="${admin_pw}";
listener.name.controller.sasl.enabled.mechanisms=PLAIN
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="${KAFKA_CONTROLLER_USER}" password="${kraft_pw}" user_${KAFKA_CONTROLLER_USER}="${kraft_pw}";
ssl.keystore.type=PEM
ssl.keystore.location=${SECURE_KAFKA_KEYSTORE}
ssl.truststore.type=PEM
ssl.truststore.location=${SECURE_CA_CERT}
ssl.client.auth=none
ssl.endpoint.identification.algorithm=https
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:${KAFKA_ADMIN_USER};User:${KAFKA_CONTROLLER_USER}
EOF
  {
    printf 'security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n'
    printf 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";\n' \
      "$KAFKA_ADMIN_USER" "$admin_pw"
    printf 'ssl.truststore.type=PEM\nssl.truststore.location=%s\n' "$SECURE_CA_CERT"
  } | secure_write "$SECURE_KAFKA_ADMIN_PROPS"
}

# The admin super user exists from the first start (the others come through the Admin API).
secure_kafka_format_args() {
  printf '%s\n' --add-scram "SCRAM-SHA-512=[name=${KAFKA_ADMIN_USER},password=$(secure_password "$KAFKA_ADMIN_USER")]"
}

# What each service reads, writes and joins (see the apps' @EventPattern handlers and bus.send
# calls). Describe and DescribeConfigs let a service check its topics at startup.
secure_kafka_spec() {
  local u
  for u in "$KAFKA_ADMIN_USER" "$KAFKA_OUTSIDE_USER" $KAFKA_SERVICE_USERS; do
    printf 'user %s %s\n' "$u" "$(secure_password_file "$u")"
  done
  cat <<EOF
# gateway: HTTP commands go through the command library, which publishes their outcomes
acl agentrun-gateway TOPIC LITERAL agentrun.command-results.v1 WRITE,DESCRIBE,DESCRIBE_CONFIGS
# gateway: reads the model replies its SSE streams carry, each process in a group of its own
acl agentrun-gateway TOPIC LITERAL agentrun.run-tokens.v1 READ,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-gateway GROUP PREFIXED agentrun-gateway-tokens READ,DESCRIBE
acl agentrun-gateway CLUSTER LITERAL kafka-cluster IDEMPOTENT_WRITE
# orchestrator: consumes commands, publishes outcomes, dead letters and run events (workflow activities)
acl agentrun-orchestrator TOPIC LITERAL agentrun.commands.v1 READ,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-orchestrator TOPIC LITERAL agentrun.command-results.v1 WRITE,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-orchestrator TOPIC LITERAL agentrun.commands.dlq.v1 WRITE,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-orchestrator TOPIC LITERAL agentrun.run-events.v1 WRITE,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-orchestrator TOPIC LITERAL agentrun.run-tokens.v1 WRITE,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-orchestrator GROUP LITERAL agentrun-orchestrator-commands READ,DESCRIBE
acl agentrun-orchestrator CLUSTER LITERAL kafka-cluster IDEMPOTENT_WRITE
# gpu-worker: publishes the run events its GPU tool calls carry, nothing else
acl agentrun-gpu-worker TOPIC LITERAL agentrun.run-events.v1 WRITE,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-gpu-worker CLUSTER LITERAL kafka-cluster IDEMPOTENT_WRITE
# projector: consumes run events, publishes run states and dead letters
acl agentrun-projector TOPIC LITERAL agentrun.run-events.v1 READ,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-projector TOPIC LITERAL agentrun.run-events.dlq.v1 WRITE,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-projector TOPIC LITERAL agentrun.run-state.v1 WRITE,DESCRIBE,DESCRIBE_CONFIGS
acl agentrun-projector GROUP LITERAL agentrun-projector READ,DESCRIBE
acl agentrun-projector CLUSTER LITERAL kafka-cluster IDEMPOTENT_WRITE
# outside: sends commands, reads outcomes and run events, in consumer groups of its own prefix
acl ${KAFKA_OUTSIDE_USER} TOPIC LITERAL agentrun.commands.v1 WRITE,DESCRIBE
acl ${KAFKA_OUTSIDE_USER} TOPIC LITERAL agentrun.command-results.v1 READ,DESCRIBE
acl ${KAFKA_OUTSIDE_USER} TOPIC LITERAL agentrun.run-events.v1 READ,DESCRIBE
acl ${KAFKA_OUTSIDE_USER} TOPIC LITERAL agentrun.run-tokens.v1 READ,DESCRIBE
acl ${KAFKA_OUTSIDE_USER} GROUP PREFIXED ${KAFKA_OUTSIDE_GROUP_PREFIX} READ,DESCRIBE
EOF
}

# Applied by StackAdmin in the same run that makes the topics.
secure_kafka_write_spec() {
  mkdir -p "$CONF_DIR/kafka"
  secure_kafka_spec >"$SECURE_KAFKA_SPEC.tmp"
  mv -f "$SECURE_KAFKA_SPEC.tmp" "$SECURE_KAFKA_SPEC"
}

# status: ApiVersions over TLS (answered before SASL authentication).
secure_kafka_ping() {
  python3 - "$KAFKA_PORT" "$SECURE_CA_CERT" <<'PY' 2>/dev/null
import socket, ssl, struct, sys
port, ca = int(sys.argv[1]), sys.argv[2]
client = b"stack-status"
body = struct.pack(">hhih", 18, 0, 4242, len(client)) + client
try:
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=2) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.settimeout(2)
            s.sendall(struct.pack(">i", len(body)) + body)
            hdr = s.recv(8)
            ok = len(hdr) == 8 and struct.unpack(">ii", hdr)[1] == 4242
except (OSError, ssl.SSLError):
    ok = False
sys.exit(0 if ok else 1)
PY
}

# ---------------------------------------------------------------------------------------------
# Postgres
# ---------------------------------------------------------------------------------------------
secure_pg_prepare() {
  install -o "$PG_OS_USER" -g "$PG_OS_USER" -m 600 "$SECURE_SERVER_KEY" "$SECURE_PG_KEY"
  mkdir -p "$CONF_DIR/postgres"
  cat >"$PG_HBA_SECURE.tmp" <<'EOF'
# Generated by deploy/local/stack.sh (secure profile) -- edits are overwritten.
# The superuser's unix socket (a 0700 directory) is the stack's own way in; TCP is TLS only.
local     all  postgres                trust
hostssl   all  all       127.0.0.1/32  scram-sha-256
hostssl   all  all       ::1/128       scram-sha-256
hostnossl all  all       0.0.0.0/0     reject
hostnossl all  all       ::/0          reject
EOF
  mv -f "$PG_HBA_SECURE.tmp" "$PG_HBA_SECURE"
  chmod 644 "$PG_HBA_SECURE"
}

secure_pg_args() {
  printf '%s\n' -c ssl=on -c "ssl_cert_file=$SECURE_SERVER_CERT" -c "ssl_key_file=$SECURE_PG_KEY" \
    -c ssl_min_protocol_version=TLSv1.2 -c "hba_file=$PG_HBA_SECURE" -c password_encryption=scram-sha-256
}

# ---------------------------------------------------------------------------------------------
# Temporal: nginx in front of the dev server
# ---------------------------------------------------------------------------------------------
NGINX_BIN=""
nginx_find_bin() {
  NGINX_BIN="$(command -v nginx 2>/dev/null || true)"
  [ -n "$NGINX_BIN" ] || { [ -x /usr/sbin/nginx ] && NGINX_BIN=/usr/sbin/nginx; }
  [ -n "$NGINX_BIN" ]
}

nginx_install() {
  nginx_find_bin && return 0
  debian_install nginx
  nginx_find_bin || die "temporal: nginx not found after installing Debian's nginx"
}

secure_nginx_write_config() {
  mkdir -p "$CONF_DIR/nginx" "$NGINX_RUN"
  cat >"$NGINX_CONF.tmp" <<EOF
# Generated by deploy/local/stack.sh (secure profile) -- edits are overwritten.
# TLS with client certificates in front of the Temporal dev server's plaintext gRPC port.
# The master (root) reads the keys; workers run unprivileged.
user nobody nogroup;
worker_processes 1;
daemon off;
pid ${NGINX_RUN}/nginx.pid;
error_log ${LOG_DIR}/nginx.log warn;

events {
  worker_connections 4096;
}

http {
  access_log off;
  client_body_temp_path ${NGINX_RUN}/client_body;
  proxy_temp_path ${NGINX_RUN}/proxy;
  fastcgi_temp_path ${NGINX_RUN}/fastcgi;
  uwsgi_temp_path ${NGINX_RUN}/uwsgi;
  scgi_temp_path ${NGINX_RUN}/scgi;

  server {
    listen 127.0.0.1:${TEMPORAL_PORT} ssl http2;
    ssl_certificate ${SECURE_SERVER_CERT};
    ssl_certificate_key ${SECURE_SERVER_KEY};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_client_certificate ${SECURE_CA_CERT};
    ssl_verify_client on;

    # Every worker poller holds a stream open; each request otherwise counts toward a reconnect.
    http2_max_concurrent_streams 1024;
    keepalive_requests 1000000;
    keepalive_timeout 1h;
    client_max_body_size 0;
    client_body_timeout 5m;
    send_timeout 5m;

    # No or a foreign client certificate: a gRPC UNAUTHENTICATED status, not an HTML page.
    error_page 495 496 = @client_certificate_required;
    location @client_certificate_required {
      default_type application/grpc;
      add_header grpc-status 16 always;
      add_header grpc-message "a client certificate issued by the stack's CA is required" always;
      return 200;
    }

    location / {
      grpc_pass grpc://127.0.0.1:${TEMPORAL_INTERNAL_PORT};
      grpc_socket_keepalive on;
      grpc_connect_timeout 5s;
      # Long polls wait about 70 s for a task.
      grpc_read_timeout 5m;
      grpc_send_timeout 5m;
    }
  }
}
EOF
  mv -f "$NGINX_CONF.tmp" "$NGINX_CONF"
}

secure_nginx_start() {
  local pid out
  if pid="$(running_pid nginx)"; then
    say "temporal: TLS proxy already running (pid $pid)"
    return 0
  fi
  nginx_install
  secure_nginx_write_config
  out="$("$NGINX_BIN" -t -q -c "$NGINX_CONF" -e "$LOG_DIR/nginx.log" 2>&1)" ||
    { printf '%s\n' "$out" >&2; die "temporal: nginx refused its configuration $NGINX_CONF"; }
  require_free_ports nginx "$TEMPORAL_PORT"
  say "temporal: starting the mTLS proxy (nginx) on 127.0.0.1:$TEMPORAL_PORT -> 127.0.0.1:$TEMPORAL_INTERNAL_PORT"
  daemon_start nginx "$LOG_DIR/nginx.out" "$NGINX_BIN" -c "$NGINX_CONF" -e "$LOG_DIR/nginx.log"
  STARTED+=(nginx)
}

# The CLI as a client of the proxy, with the platform's certificate.
tcli_tls() {
  "$TEMPORAL_BIN" "$@" --address "127.0.0.1:$TEMPORAL_PORT" --command-timeout 10s \
    --tls-ca-path "$SECURE_CA_CERT" --tls-cert-path "$SECURE_TEMPORAL_CLIENT_CERT" --tls-key-path "$SECURE_TEMPORAL_CLIENT_KEY"
}

secure_nginx_wait() {
  local deadline out
  deadline=$(($(now) + TEMPORAL_START_TIMEOUT))
  while :; do
    running_pid nginx >/dev/null || fail_service nginx "process exited during startup" "$LOG_DIR/nginx.out"
    if out="$(tcli_tls operator cluster health 2>&1)" && [[ "$out" == *SERVING* ]]; then
      break
    fi
    [ "$(now)" -lt "$deadline" ] || fail_service nginx "no healthy answer through the proxy after ${TEMPORAL_START_TIMEOUT}s: $out" "$LOG_DIR/nginx.out"
    sleep 0.5
  done
  say "temporal: mTLS proxy ready on 127.0.0.1:$TEMPORAL_PORT (pid $(running_pid nginx || echo '?'))"
}

# ---------------------------------------------------------------------------------------------
# What clients read
# ---------------------------------------------------------------------------------------------
# How a platform client reaches the secure Kafka listener; each file adds its own user.
secure_kafka_settings() {
  cat <<EOF
KAFKA_BROKERS=127.0.0.1:${KAFKA_PORT}
KAFKA_SECURITY_PROTOCOL=SASL_SSL
KAFKA_SASL_MECHANISM=SCRAM-SHA-512
KAFKA_SSL_CA_FILE=${SECURE_CA_CERT}
EOF
}

secure_write_client_files() {
  local brokers="127.0.0.1:$KAFKA_PORT" svc
  # librdkafka form, for kcat -F and other librdkafka clients.
  secure_write "$SECURE_DIR/client.properties" <<EOF
bootstrap.servers=${brokers}
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=${KAFKA_OUTSIDE_USER}
sasl.password=$(secure_password "$KAFKA_OUTSIDE_USER")
ssl.ca.location=${SECURE_CA_CERT}
EOF
  # Shared by every platform service; the Kafka identity is per service (env/<service>.env).
  {
    echo '# Generated by deploy/local/stack.sh (secure profile): read this, then env/<service>.env.'
    secure_kafka_settings
    cat <<EOF
TEMPORAL_ADDRESS=127.0.0.1:${TEMPORAL_PORT}
TEMPORAL_NAMESPACE=${TEMPORAL_NAMESPACE}
TEMPORAL_TLS=true
TEMPORAL_TLS_SERVER_CA_CERT_PATH=${SECURE_CA_CERT}
TEMPORAL_TLS_CLIENT_CERT_PATH=${SECURE_TEMPORAL_CLIENT_CERT}
TEMPORAL_TLS_CLIENT_KEY_PATH=${SECURE_TEMPORAL_CLIENT_KEY}
TEMPORAL_TLS_SERVER_NAME=localhost
DATABASE_URL=postgres://${POSTGRES_USER}@127.0.0.1:${POSTGRES_PORT}/${POSTGRES_DB}
DATABASE_SSLMODE=verify-full
DATABASE_SSL_CA_FILE=${SECURE_CA_CERT}
DATABASE_PASSWORD_FILE=$(secure_password_file postgres)
EOF
  } | secure_write "$SECURE_DIR/platform.env"
  for svc in $PLATFORM_SERVICES; do
    if [[ " $KAFKA_SERVICE_USERS " == *" agentrun-$svc "* ]]; then
      secure_write "$SECURE_DIR/env/$svc.env" <<EOF
KAFKA_SASL_USERNAME=agentrun-${svc}
KAFKA_SASL_PASSWORD_FILE=$(secure_password_file "agentrun-$svc")
EOF
    else
      printf '# %s uses no Kafka: platform.env is all it needs.\n' "$svc" | secure_write "$SECURE_DIR/env/$svc.env"
    fi
  done
  # For `npm run topics` and other operator tools: the super user.
  {
    secure_kafka_settings
    cat <<EOF
KAFKA_SASL_USERNAME=${KAFKA_ADMIN_USER}
KAFKA_SASL_PASSWORD_FILE=$(secure_password_file "$KAFKA_ADMIN_USER")
EOF
  } | secure_write "$SECURE_DIR/admin.env"
  # The files are secrets or point at secrets; none of them is needed by another OS user.
  chmod 700 "$SECURE_DIR/env"
}

# ---------------------------------------------------------------------------------------------
# kcat for the outside principal
# ---------------------------------------------------------------------------------------------
# Debian's kcat links librdkafka 2.0, whose SCRAM final message repeats the client nonce, and Kafka 4
# refuses that. The librdkafka inside PyPI's confluent-kafka wheel (its dependencies linked in) is
# recent, and librdkafka's C API is stable, so Debian's kcat runs on it unchanged.
LIBRDKAFKA_VERSION="${LIBRDKAFKA_VERSION:-2.16.1}" # PyPI confluent-kafka
LIBRDKAFKA_DIR="$OPT_DIR/librdkafka/$LIBRDKAFKA_VERSION"

secure_kcat_install() {
  command -v kcat >/dev/null 2>&1 || debian_install kcat
  [ -f "$LIBRDKAFKA_DIR/.installed" ] && return 0
  say "secure: taking librdkafka $LIBRDKAFKA_VERSION for kcat (PyPI confluent-kafka wheel)"
  local tmp="$LIBRDKAFKA_DIR.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  if ! python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform "manylinux_2_28_$(uname -m)" --python-version 3.11 \
    "confluent-kafka==$LIBRDKAFKA_VERSION" -d "$tmp" >"$tmp/pip.log" 2>&1 ||
    ! python3 - "$tmp" <<'PY'; then
import glob, os, re, sys, zipfile
tmp = sys.argv[1]
(wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
with zipfile.ZipFile(wheel) as z:
    (name,) = [n for n in z.namelist() if re.search(r"\.libs/librdkafka[^/]*\.so", n)]
    with z.open(name) as src, open(os.path.join(tmp, "librdkafka.so.1"), "wb") as dst:
        dst.write(src.read())
os.remove(wheel)
PY
    warn "secure: no librdkafka for kcat (see $tmp/pip.log); .stack/secure/kcat will not authenticate"
    return 0
  fi
  printf 'confluent-kafka==%s\n' "$LIBRDKAFKA_VERSION" >"$tmp/.installed"
  mv -T "$tmp" "$LIBRDKAFKA_DIR" 2>/dev/null || rm -rf "$tmp"
  install_log pypi "confluent-kafka==$LIBRDKAFKA_VERSION (its librdkafka only, for kcat)"
}

secure_write_kcat() {
  cat >"$SECURE_DIR/kcat.tmp" <<EOF
#!/bin/sh
# Generated by deploy/local/stack.sh: Debian's kcat on a librdkafka whose SCRAM Kafka 4 accepts.
#   .stack/secure/kcat -F .stack/secure/client.properties -t agentrun.run-events.v1 -C
LD_LIBRARY_PATH="${LIBRDKAFKA_DIR}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec kcat "\$@"
EOF
  chmod 755 "$SECURE_DIR/kcat.tmp"
  mv -f "$SECURE_DIR/kcat.tmp" "$SECURE_DIR/kcat"
}
