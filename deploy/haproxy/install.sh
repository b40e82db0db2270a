#!/bin/sh
# Install HAProxy (Debian/Ubuntu package `haproxy`) unless it is already installed: the `deploy` tox env's first
# step. Needs root, or sudo without a password; elsewhere install it yourself (any HAProxy >= 2.4 works).
set -eu

if command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ]; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "deploy/haproxy/install.sh: haproxy is missing; install it as root: apt-get install -y haproxy" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "deploy/haproxy/install.sh: no apt-get here; install HAProxy >= 2.4 with your package manager" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet: update them only when the first attempt fails.
$SUDO apt-get install -y --no-install-recommends haproxy || {
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends haproxy
}
