#!/usr/bin/env bash
# Make sure virsh is on PATH for the agent's libvirt test (libvirt's own test driver,
# test:///default: no daemon, no VM). Debian's libvirt-clients is installed when absent.
set -euo pipefail

PATH="$PATH:/usr/sbin:/sbin"

AS_ROOT_ELSE="install libvirt-clients yourself"
# shellcheck source=as-root.sh
. "$(dirname "$0")/as-root.sh"

if command -v virsh >/dev/null 2>&1; then
    exit 0
fi
echo "virsh not found: installing Debian's libvirt-clients (for the agent's libvirt test)"
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -qq
as_root apt-get install -y -qq --no-install-recommends libvirt-clients >/dev/null
virsh -c test:///default list --name >/dev/null
