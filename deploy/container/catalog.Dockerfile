# syntax=docker/dockerfile:1
# The llmgw-catalog image: the catalog REST API. It holds the built app (dist/apps/catalog: one
# JavaScript bundle with the workspace libs inside, no TypeScript loader) and the npm packages
# its generated package.json and lockfile list, nothing else of the repository: no tests,
# benchmarks, simulators or engines. catalog.Dockerfile.dockerignore keeps everything but
# dist/apps/catalog out of the build context.
#
# Build the app first, then the image, from the repository root:
#   npx nx build catalog-api
#   docker build -f deploy/container/catalog.Dockerfile -t llmgw-catalog:0.1.0 .
# or both at once: npx nx run catalog-api:container
# Run:
#   docker run --rm -p 8083:8083 -e LLMGW_CATALOG_ADMIN_TOKEN=… llmgw-catalog:0.1.0
#
# Settings are the app's LLMGW_* variables (apps/catalog/src/config/). The image sets
# LLMGW_HOST=0.0.0.0 (reachable through the container's network) and LLMGW_DATA_DIR to the
# volume /var/lib/llmgw, the only place the app writes; the rest of the file system may be
# read-only. No HEALTHCHECK: compose and Kubernetes probe GET /healthz and /readyz.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /opt/llmgw
# The SQLite driver is a native module: npm compiles it when no prebuilt binary can be
# downloaded, so this stage (and only this one) has a compiler toolchain.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY dist/apps/catalog/package.json dist/apps/catalog/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force

FROM ${NODE_IMAGE}
ENV LLMGW_HOST=0.0.0.0 \
    LLMGW_DATA_DIR=/var/lib/llmgw \
    HOME=/var/lib/llmgw
RUN groupadd --system --gid 10001 llmgw \
 && useradd --system --uid 10001 --gid llmgw --home-dir /var/lib/llmgw --shell /usr/sbin/nologin llmgw \
 && install -d -o llmgw -g llmgw -m 0750 /var/lib/llmgw
WORKDIR /opt/llmgw
COPY --from=deps /opt/llmgw/node_modules ./node_modules
COPY dist/apps/catalog/ ./
VOLUME ["/var/lib/llmgw"]
# Numeric, so Kubernetes can verify runAsNonRoot.
USER 10001:10001
EXPOSE 8083
ENTRYPOINT ["node", "main.js"]
