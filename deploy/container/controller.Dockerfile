# syntax=docker/dockerfile:1
# The llmgw-controller image: the controller (admin API on 8081, gRPC for agents and routers on 8082). It holds the built app (dist/apps/controller: one
# JavaScript bundle with the workspace libs inside, no TypeScript loader) and the npm packages
# its generated package.json and lockfile list, nothing else of the repository: no tests,
# benchmarks, simulators or engines. controller.Dockerfile.dockerignore keeps everything but
# dist/apps/controller out of the build context.
#
# Build the app first, then the image, from the repository root:
#   npx nx build controller
#   docker build -f deploy/container/controller.Dockerfile -t llmgw-controller:0.1.0 .
# or both at once: npx nx run controller:container
# Run:
#   docker run --rm -p 8081:8081 -p 8082:8082 -e LLMGW_CONTROLLER_JOIN_TOKEN=… … llmgw-controller:0.1.0
#
# Settings are the app's LLMGW_* variables (apps/controller/src/config/). The image sets
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
COPY dist/apps/controller/package.json dist/apps/controller/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force

FROM ${NODE_IMAGE}
# V8's heap sized for the controller, not for the host: without it Node sizes the heap from the
# machine's memory (4 GB on a 24 GB host) and lets garbage pile up to several times the live heap
# before collecting it. 512 MB of old generation is ~7x the live heap at 2,000 nodes x 8 GPUs
# (docs/benchmarks.md); raise it with NODE_OPTIONS for larger fleets, and keep the container's
# memory limit (1 GiB in deploy/kubernetes) above it.
ENV LLMGW_HOST=0.0.0.0 \
    LLMGW_DATA_DIR=/var/lib/llmgw \
    HOME=/var/lib/llmgw \
    NODE_OPTIONS="--max-old-space-size=512 --max-semi-space-size=4"
RUN groupadd --system --gid 10001 llmgw \
 && useradd --system --uid 10001 --gid llmgw --home-dir /var/lib/llmgw --shell /usr/sbin/nologin llmgw \
 && install -d -o llmgw -g llmgw -m 0750 /var/lib/llmgw
WORKDIR /opt/llmgw
COPY --from=deps /opt/llmgw/node_modules ./node_modules
COPY dist/apps/controller/ ./
VOLUME ["/var/lib/llmgw"]
# Numeric, so Kubernetes can verify runAsNonRoot.
USER 10001:10001
EXPOSE 8081 8082
ENTRYPOINT ["node", "main.js"]
