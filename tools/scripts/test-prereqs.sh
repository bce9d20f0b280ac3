#!/usr/bin/env bash
# What the tests need from the machine, made present: promtool (Debian `prometheus`),
# redis-server, the PostgreSQL server binaries, systemd-analyze, nginx and haproxy (the load
# balancers of the router-fleet tests), installed with apt-get when
# missing (as root, or through sudo); then the local PostgreSQL and Redis started when they do not
# answer. `npm test` runs this first, so the README's test command needs nothing installed by hand
# on a Debian machine. Elsewhere it names what is missing and exits 1.
set -uo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
fi

need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
[ -x /usr/sbin/nginx ] || need+=(nginx)
[ -x /usr/sbin/haproxy ] || need+=(haproxy)

if [ "${#need[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1 || { [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; }; then
    echo "test prerequisites missing: ${need[*]} (Debian package names). Install them, or run as root on Debian so npm test installs them."
    exit 1
  fi
  echo "installing test prerequisites: ${need[*]}"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }; then
    echo "apt-get install ${need[*]} failed"
    exit 1
  fi
fi

# The local servers the store, lease and Redis tests use unless LLMGW_TEST_DATABASE_URL /
# LLMGW_TEST_REDIS_URL point elsewhere (STACK.md).
if [ -z "${LLMGW_TEST_DATABASE_URL:-}" ] && ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  echo "starting PostgreSQL"
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start || echo "could not start PostgreSQL"
fi
if [ -z "${LLMGW_TEST_REDIS_URL:-}" ] && ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /tmp --logfile /tmp/llmgw-test-redis.log || echo "could not start Redis"
fi
exit 0
