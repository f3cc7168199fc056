#!/usr/bin/env bash
# Make sure a RabbitMQ broker answers on 127.0.0.1:5672 (guest/guest).
# Installs Debian's rabbitmq-server when it is absent, starts it when stopped.
set -euo pipefail

if ! command -v rabbitmq-server >/dev/null 2>&1; then
    echo "rabbitmq-server not found: installing Debian package rabbitmq-server"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq rabbitmq-server
fi

if ! rabbitmqctl -q status >/dev/null 2>&1; then
    echo "starting rabbitmq-server"
    rabbitmq-server -detached
fi
rabbitmqctl -q await_startup --timeout 120
