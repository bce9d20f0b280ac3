# syntax=docker/dockerfile:1
# The llmgw-router image: the router (the OpenAI API). It holds the built app (dist/apps/router: one
# JavaScript bundle with the workspace libs inside, no TypeScript loader) and the npm packages
# its generated package.json and lockfile list, nothing else of the repository: no tests,
# benchmarks, simulators or engines. router.Dockerfile.dockerignore keeps everything but
# dist/apps/router out of the build context.
#
# Build the app first, then the image, from the repository root:
#   npx nx build router
#   docker build -f deploy/container/router.Dockerfile -t llmgw-router:0.1.0 .
# or both at once: npx nx run router:container
# Run:
#   docker run --rm -p 8080:8080 -e LLMGW_ROUTER_CONTROLLER=… -e LLMGW_ROUTER_CONTROLLER_TOKEN=… llmgw-router:0.1.0
#
# Settings are the app's LLMGW_* variables (apps/router/src/config/). The image sets
# LLMGW_HOST=0.0.0.0 (reachable through the container's network) and LLMGW_DATA_DIR to the
# volume /var/lib/llmgw, the only place the app writes; the rest of the file system may be
# read-only. No HEALTHCHECK: compose and Kubernetes probe GET /healthz and /readyz.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /opt/llmgw
COPY dist/apps/router/package.json dist/apps/router/package-lock.json ./
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
COPY dist/apps/router/ ./
VOLUME ["/var/lib/llmgw"]
# Numeric, so Kubernetes can verify runAsNonRoot.
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["node", "main.js"]
