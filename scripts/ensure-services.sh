#!/usr/bin/env bash
# Makes sure the services the tests talk to are up on loopback: NATS with JetStream on
# 127.0.0.1:4222 (plus the nats-server binary, for tests that start their own servers) and
# Redis on 127.0.0.1:6379 (the cluster bench's baseline), and Debian's chromium for the audit
# console's browser test. Starts or installs what is missing;
# never touches a service that already answers. Used by `npm test` (pretest) and .ci/run.
set -u
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@") >/dev/null 2>&1 \
      || echo "ensure-services: apt-get install $* failed" >&2
  else
    echo "ensure-services: please install $* (e.g. sudo apt-get install $*)" >&2
  fi
}
NATS=$(command -v nats-server || { [ -x /usr/sbin/nats-server ] && echo /usr/sbin/nats-server; } || true)
if [ -z "$NATS" ]; then
  apt_install nats-server
  NATS=$(command -v nats-server || { [ -x /usr/sbin/nats-server ] && echo /usr/sbin/nats-server; } || true)
fi
if ! up 4222 && [ -n "$NATS" ]; then
  dir="${TMPDIR:-/tmp}/jcp-nats-4222"
  mkdir -p "$dir"
  nohup "$NATS" -a 127.0.0.1 -p 4222 -js -sd "$dir" -l "$dir/nats.log" >/dev/null 2>&1 &
  for _ in $(seq 1 50); do up 4222 && break; sleep 0.2; done
fi
if ! up 6379; then
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server
  if command -v redis-server >/dev/null 2>&1; then
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null 2>&1 || true
    for _ in $(seq 1 50); do up 6379 && break; sleep 0.2; done
  fi
fi
# Debian's chromium: the audit console's browser test (test/console/) drives it with playwright-core.
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  apt_install chromium
fi
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || echo "ensure-services: chromium is not installed (the console test needs it)" >&2
up 4222 || echo "ensure-services: NATS is not answering on 127.0.0.1:4222" >&2
up 6379 || echo "ensure-services: Redis is not answering on 127.0.0.1:6379" >&2
exit 0
