#!/bin/sh
# Installs the Debian packages llmd builds and tests with.  Idempotent: a
# package already installed is left alone.  Works as root or through sudo.
set -eu
PKGS="build-essential pkg-config git python3 python3-pip python3-venv clang libclang-rt-14-dev
clang-format cppcheck valgrind curl ca-certificates unzip openssl sqlite3 prometheus
libevent-dev libssl-dev libsqlite3-dev check libsubunit-dev libjansson-dev libpcre2-dev
libopenblas-dev libsystemd-dev libncurses-dev rpm debhelper lintian"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "deps: all packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "deps: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
