#!/usr/bin/env bash
# Installs Debian/Ubuntu packages with apt-get (with sudo when not root), updating the package
# lists first when they are missing or older than a day. Usage: scripts/apt-install.sh PACKAGE...
set -euo pipefail

SUDO=
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
    echo "apt-install: updating apt package lists"
    $SUDO apt-get update
fi
echo "apt-install: installing $*"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
