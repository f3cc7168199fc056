#!/usr/bin/env bash
# Make sure a RabbitMQ broker answers on 127.0.0.1:5672 (guest/guest) for the tests.
# A broker that already answers is used as it is. Otherwise Debian's
# rabbitmq-server is installed when absent and started when stopped.
set -euo pipefail

PATH="$PATH:/usr/sbin:/sbin"
HOST=127.0.0.1
PORT=5672

answers() { (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }

AS_ROOT_ELSE="start a broker on 127.0.0.1:5672 (guest/guest) yourself"
# shellcheck source=as-root.sh
. "$(dirname "$0")/as-root.sh"

if answers; then
    # running: wait until it is fully up when we can ask it (a node still booting
    # accepts TCP before it accepts logins; the machine's rabbitmqctl needs root)
    if command -v rabbitmqctl >/dev/null 2>&1 && can_be_root; then
        as_root rabbitmqctl -q await_startup --timeout 120 || true
    fi
    exit 0
fi

if ! command -v rabbitmq-server >/dev/null 2>&1; then
    echo "no broker on $HOST:$PORT and rabbitmq-server not found: installing Debian's rabbitmq-server"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    as_root apt-get install -y -qq rabbitmq-server
    # the package may start the broker itself; give it the chance before starting another
    for _ in $(seq 1 30); do answers && break; sleep 1; done
fi

if ! answers; then
    echo "starting rabbitmq-server"
    as_root rabbitmq-server -detached
fi
# await_startup fails at once until the booting node has registered with epmd
for _ in $(seq 1 60); do
    as_root rabbitmqctl -q await_startup --timeout 120 >/dev/null 2>&1 && break
    sleep 1
done
for _ in $(seq 1 30); do answers && exit 0; sleep 1; done
echo "RabbitMQ did not answer on $HOST:$PORT" >&2
exit 1
