#!/usr/bin/env bash
# Writes the compose stack's secrets once: the database password (Postgres and every app), the
# gateway's cursor-signing secret, the orchestrator's command key secret and the run-event signing
# key (orchestrator and projector, in the form kid:secret). docker-compose.yml mounts them as files
# (/run/secrets/<name>), which the apps read through DATABASE_PASSWORD_FILE, CURSOR_SECRET_FILE,
# AGENTRUN_COMMAND_KEY_SECRET_FILE and AGENTRUN_EVENT_KEYS_FILE. Existing files are kept, so the
# password keeps matching the one Postgres was initialised with.
set -euo pipefail
dir="$(cd "$(dirname "$0")/../.." && pwd)/.stack/compose/secrets"
mkdir -p "$dir"
chmod 700 "$dir"
for name in database-password cursor-secret command-key-secret; do
  if [ ! -s "$dir/$name" ]; then
    # Readable inside the containers (they run as other users); the directory keeps other host users out.
    (umask 022 && openssl rand -hex 24 >"$dir/$name")
    echo "[compose] wrote $dir/$name"
  fi
done
if [ ! -s "$dir/event-keys" ]; then
  (umask 022 && echo "compose-1:$(openssl rand -hex 32)" >"$dir/event-keys")
  echo "[compose] wrote $dir/event-keys"
fi
