# One image for all five AgentRun services. The service is chosen by the command, e.g.
#   docker run agentrun apps/orchestrator/dist/main.js
# and the operator steps run from it too: `tools/migrate.js` (the schema, before a rollout),
# `tools/topics.js apply|check` (the Kafka topics), `tools/token.js` (API tokens), `tools/budget.js` (orgs' monthly budgets).
# (the entrypoint is `node`; docker-compose.yml sets the command per service).
#
# Stages: manifests (package.json files only, so dependency layers stay cached while code changes)
# -> deps (npm ci, dev deps included) -> build (tsc -b + workflow bundle + dashboard bundle)
# -> prod-deps (npm ci --omit=dev) -> runtime (prod node_modules + compiled output, non-root).

ARG NODE_IMAGE=node:20-bookworm-slim
# Behind a TLS-inspecting proxy the registry's certificate is signed by a CA the base image does not
# know: give the host's bundle as a build secret, which npm then trusts (it never lands in a layer):
#   docker build --secret id=extra-ca,src=/etc/ssl/certs/ca-certificates.crt .
# Without the secret the mount is empty and npm uses its own roots.

FROM ${NODE_IMAGE} AS base
WORKDIR /app
ENV npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false \
    NX_DAEMON=false \
    NX_NO_CLOUD=true

# --- only the files npm ci reads: root package.json, lock file, and each workspace's package.json ---
FROM base AS manifests
COPY . /src
RUN mkdir -p /manifests \
 && cd /src \
 && cp package.json package-lock.json /manifests/ \
 && for f in libs/*/package.json; do \
      mkdir -p "/manifests/$(dirname "$f")" && cp "$f" "/manifests/$f"; \
    done

# --- all dependencies (TypeScript, @types/*, the workflow bundler's needs) ---
FROM base AS deps
COPY --from=manifests /manifests/ ./
RUN --mount=type=secret,id=extra-ca NODE_EXTRA_CA_CERTS=/run/secrets/extra-ca npm ci

# --- compile libs and apps in place (libs/*/dist, apps/*/dist), then bundle the workflows and the dashboard;
#     the shipped eval suites (libs/evals/suites, read beside libs/evals/dist) go into the image with them ---
FROM deps AS build
COPY . .
RUN npx tsc -b tsconfig.build.json \
 && node tools/bundle-workflows.js \
 && node tools/bundle-dashboard.js \
 && mkdir -p /out \
 && tar -cf - --exclude='*.tsbuildinfo' package.json apps/*/dist libs/*/package.json libs/*/dist libs/evals/suites tools/migrate.js tools/topics.js tools/cli.js tools/token.js tools/budget.js \
    | tar -xf - -C /out

# --- production dependencies only (dev deps pruned); workspace links node_modules/@agentrun/* -> libs/* ---
FROM base AS prod-deps
ENV NODE_ENV=production
COPY --from=manifests /manifests/ ./
RUN --mount=type=secret,id=extra-ca NODE_EXTRA_CA_CERTS=/run/secrets/extra-ca npm ci --omit=dev \
 && npm cache clean --force

# --- runtime ---
# Production by default: every app listens on all interfaces (a container's port is reached from
# outside it) and AGENTRUN_MODE=production takes the org only from API tokens and refuses development
# secrets. Local mode, which trusts X-Org, refuses to listen on anything but loopback.
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    AGENTRUN_MODE=production \
    WORKSPACE_ROOT=/var/lib/agentrun/workspaces \
    OBJECT_STORE_DIR=/var/lib/agentrun/objects \
    GATEWAY_HOST=0.0.0.0 \
    ORCHESTRATOR_HOST=0.0.0.0 \
    GPU_WORKER_HOST=0.0.0.0 \
    PROJECTOR_HOST=0.0.0.0 \
    SNAPSHOTTER_HOST=0.0.0.0
WORKDIR /app
# Code and dependencies stay root-owned (read-only for the service user); only the data dir is writable.
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /out/ ./
# A named volume mounted at /var/lib/agentrun starts as a copy of this directory, ownership included.
RUN mkdir -p /var/lib/agentrun/workspaces /var/lib/agentrun/objects \
 && chown -R node:node /var/lib/agentrun
USER node
EXPOSE 8080 8081 8082 8083 8084
ENTRYPOINT ["node"]
CMD ["apps/gateway/dist/main.js"]
