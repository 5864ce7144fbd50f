#!/bin/sh
# test-packaging.sh: installs the llmd .deb on this machine, checks what the
# package and its maintainer scripts set up, serves one real completion over
# TLS with the unit's own ExecStart command run by hand as the llmd user,
# then removes and purges the package and checks the machine is as before.
#
# When llmd-cuda_*.deb lies beside the llmd .deb (make deb built the CUDA
# backend), it is installed too and its library checked to be where llmd's
# dlopen("libllmd_cuda.so") looks without LLMD_CUDA_LIB.
#
# The one idea: the package is judged from the outside, as an operator meets
# it.  systemd need not be running (containers, CI): the daemon is started
# the way the unit would start it, so the unit's command line, user and
# files are what gets tested.  Needs root; refuses to run where llmd is
# already installed or the llmd user exists, since purging must not take
# away anything that was there before.
#
# Usage: scripts/test-packaging.sh LLMD_DEB [MODEL.gguf]
set -eu

DEB=${1:?usage: test-packaging.sh LLMD_DEB [MODEL.gguf]}
MODEL=${2:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
DEB=$(readlink -f "$DEB")
MODEL=$(readlink -f "$MODEL")
CUDA_DEB=$(find "$(dirname "$DEB")" -maxdepth 1 -name 'llmd-cuda_*_amd64.deb' | head -1)
UNIT_SRC=$(dirname "$0")/../packaging/llmd.service
DB=/var/lib/llmd/llmd.db
CERT=/etc/llmd/tls/cert.pem
WORK=$(mktemp -d)
DAEMON_PID=""
MADE_RUN=0

fail() {
    echo "test-packaging: FAIL: $*" >&2
    exit 1
}
ok() { echo "test-packaging: ok: $*"; }

cleanup() {
    if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
        kill "$DAEMON_PID" 2>/dev/null || true
        wait "$DAEMON_PID" 2>/dev/null || true
    fi
    for p in llmd-cuda llmd; do
        if dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -qv "not-installed"; then
            DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $p >/dev/null 2>&1 || true
        fi
    done
    [ "$MADE_RUN" = 1 ] && rm -rf /run/llmd
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" -eq 0 ] || fail "needs root (installs a package)"
[ -f "$DEB" ] || fail "no package $DEB"
[ -f "$MODEL" ] || fail "no model $MODEL"
for p in llmd llmd-cuda; do
    if dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "install ok"; then
        fail "$p is already installed here; refusing to purge it"
    fi
done
getent passwd llmd >/dev/null && fail "a user llmd exists already"
getent group llmd >/dev/null && fail "a group llmd exists already"
for p in /var/lib/llmd /etc/llmd /run/llmd; do
    [ -e "$p" ] && fail "$p exists already"
done
WANTS_BEFORE=$(find /etc/systemd/system -path '*.wants/*' 2>/dev/null | sort | tr '\n' ' ')

# mode_owner PATH -> "MODE USER:GROUP"
mode_owner() { stat -c '%a %U:%G' "$1"; }
expect_mode() {
    got=$(mode_owner "$1")
    [ "$got" = "$2" ] || fail "$1 is '$got', expected '$2'"
}

# ---- install ----------------------------------------------------------------
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$DEB" >"$WORK/apt.log" 2>&1 ||
    { cat "$WORK/apt.log" >&2; fail "apt-get install"; }
ok "installed $(dpkg-query -W -f='${Package} ${Version}' llmd)"

if [ -n "$CUDA_DEB" ]; then
    # dpkg, not apt: the CUDA runtime it needs at run time may come from
    # outside the archive, and only the file's place is checked here.
    dpkg -i "$CUDA_DEB" >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log" >&2; fail "install llmd-cuda"; }
    so=$(dpkg -L llmd-cuda | grep '/libllmd_cuda\.so$') || fail "llmd-cuda has no libllmd_cuda.so"
    /lib64/ld-linux-x86-64.so.2 --help | grep -q "^  $(dirname "$so") (system search path)" ||
        fail "$so is not on the loader's default search path"
    ok "llmd-cuda puts $so where dlopen finds it"
fi

for f in /usr/bin/llmd /usr/bin/llmadmin /etc/llmd/llmd.conf /lib/systemd/system/llmd.service \
    /usr/share/man/man8/llmd.8.gz /usr/share/man/man8/llmadmin.8.gz \
    /usr/share/man/man5/llmd.conf.5.gz /usr/share/bash-completion/completions/llmadmin \
    /usr/share/doc/llmd/copyright; do
    [ -f "$f" ] || fail "missing $f"
done
dpkg-query -W -f='${Conffiles}\n' llmd | grep -q '/etc/llmd/llmd.conf' ||
    fail "/etc/llmd/llmd.conf is not a conffile"
ver=$(/usr/bin/llmd --version)
echo "$ver" | grep -q "$(dpkg-query -W -f='${Version}' llmd)" || fail "llmd --version says '$ver'"
ok "files, conffile, version"

getent passwd llmd | awk -F: '$3 >= 1000 { exit 1 }' || fail "llmd is not a system user"
getent group llmd >/dev/null || fail "no group llmd"
expect_mode /var/lib/llmd "750 llmd:llmd"
[ -f "$DB" ] || fail "postinst made no $DB"
[ "$(stat -c %U "$DB")" = llmd ] || fail "$DB not owned by llmd"
expect_mode "$CERT" "644 root:root"
expect_mode /etc/llmd/tls/key.pem "640 root:llmd"
openssl x509 -in "$CERT" -noout -ext subjectAltName | grep -q 127.0.0.1 ||
    fail "certificate does not name 127.0.0.1"
[ -L /etc/systemd/system/multi-user.target.wants/llmd.service ] ||
    fail "llmd.service is not enabled"
ok "user, state directory, database, certificate, service enabled"

# systemd-analyze checks that ExecStart's program exists: the installed one.
systemd-analyze verify "$UNIT_SRC" || fail "systemd-analyze verify"
cmp -s "$UNIT_SRC" /lib/systemd/system/llmd.service || fail "installed unit differs from the source"
ok "systemd-analyze verify"

# The unit is enabled but must not start before a model is configured: its
# ExecCondition fails on the shipped llmd.conf and passes once "model =" is set.
COND=$(sed -n 's/^ExecCondition=//p' /lib/systemd/system/llmd.service)
[ -n "$COND" ] || fail "no ExecCondition in the unit"
if eval "$COND"; then fail "ExecCondition passes with no model configured"; fi
cp -p /etc/llmd/llmd.conf "$WORK/llmd.conf"
echo "model = /var/lib/llmd/models/x.gguf" >>/etc/llmd/llmd.conf
eval "$COND" || fail "ExecCondition fails with a model configured"
cp -p "$WORK/llmd.conf" /etc/llmd/llmd.conf
ok "ExecCondition holds the start back until a model is configured"

# ---- tenants and keys as root ------------------------------------------------
llmadmin --db "$DB" tenant add pkgtest >/dev/null || fail "llmadmin tenant add"
KEY=$(llmadmin --db "$DB" --json key create pkgtest |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])') || fail "llmadmin key create"
case "$KEY" in sk-llmd-*) ;; *) fail "key create printed '$KEY'" ;; esac
[ "$(stat -c %U "$DB")" = llmd ] || fail "llmadmin as root changed the DB's owner"
ok "tenant add, key create"

# ---- the unit's ExecStart, by hand, as llmd ------------------------------------
MODELS=/var/lib/llmd/models
install -d -o llmd -g llmd -m 0750 "$MODELS"
install -o llmd -g llmd -m 0640 "$MODEL" "$MODELS/"
MODEL_ID=$(basename "$MODEL" .gguf)
# What RuntimeDirectory=llmd would make (the admin socket lives there).
install -d -o llmd -g llmd -m 0750 /run/llmd
MADE_RUN=1
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
EXEC=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/llmd.service)
[ -n "$EXEC" ] || fail "no ExecStart in the unit"
# setpriv execs (no forking wrapper), so $DAEMON_PID is llmd itself and gets
# the SIGTERM.  The unit's command line is split on spaces as systemd would.
# shellcheck disable=SC2086
setpriv --reuid=llmd --regid=llmd --init-groups -- $EXEC --model "$MODELS/$(basename "$MODEL")" --listen "127.0.0.1:$PORT" \
    --kv-blocks 64 --swap-blocks 0 2>"$WORK/llmd.log" &
DAEMON_PID=$!
URL="https://127.0.0.1:$PORT"
i=0
until curl -sf --cacert "$CERT" "$URL/health" >/dev/null 2>&1; do
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$WORK/llmd.log" >&2; fail "llmd exited"; }
    i=$((i + 1))
    [ $i -lt 600 ] || { cat "$WORK/llmd.log" >&2; fail "llmd not ready after 60 s"; }
    sleep 0.1
done
[ "$(ps -o user= -p "$DAEMON_PID")" = llmd ] || fail "llmd does not run as user llmd"
ok "llmd ready on $URL, running as llmd"

curl -sS --fail-with-body --cacert "$CERT" -H "Authorization: Bearer $KEY" \
    -H 'Content-Type: application/json' -o "$WORK/resp.json" "$URL/v1/chat/completions" \
    -d "{\"model\":\"$MODEL_ID\",\"max_tokens\":8,\"temperature\":0,
         \"messages\":[{\"role\":\"user\",\"content\":\"What is the capital of France?\"}]}" ||
    { cat "$WORK/resp.json" >&2; fail "completion request"; }
python3 - "$WORK/resp.json" <<'PY' || fail "completion response: $(cat "$WORK/resp.json")"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["choices"][0]
assert c["message"]["role"] == "assistant" and c["message"]["content"], r
assert r["usage"]["completion_tokens"] >= 1, r
print("test-packaging: ok: completion:", repr(c["message"]["content"]))
PY

kill -TERM "$DAEMON_PID"
rc=0
wait "$DAEMON_PID" || rc=$?
DAEMON_PID=""
[ $rc -eq 0 ] || { cat "$WORK/llmd.log" >&2; fail "llmd exited $rc on SIGTERM"; }
rows=$(llmadmin --db "$DB" --json usage --rows 10 |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$rows" = 1 ] || fail "usage ledger has $rows rows, expected 1"
ok "drained on SIGTERM, ledger row written"
rm -rf /run/llmd
MADE_RUN=0

# ---- remove keeps data, purge removes it ----------------------------------------
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq llmd >"$WORK/apt.log" 2>&1 ||
    { cat "$WORK/apt.log" >&2; fail "apt-get remove"; }
[ ! -e /usr/bin/llmd ] || fail "remove left /usr/bin/llmd"
[ -f "$DB" ] || fail "remove deleted the database"
getent passwd llmd >/dev/null || fail "remove deleted the user"
ok "remove keeps the database and user"

# Removing llmd removed llmd-cuda too (it depends on llmd).
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq llmd ${CUDA_DEB:+llmd-cuda} >"$WORK/apt.log" 2>&1 ||
    { cat "$WORK/apt.log" >&2; fail "apt-get purge"; }
getent passwd llmd >/dev/null && fail "purge left the user llmd"
getent group llmd >/dev/null && fail "purge left the group llmd"
for p in /var/lib/llmd /etc/llmd /run/llmd /lib/systemd/system/llmd.service; do
    [ ! -e "$p" ] || fail "purge left $p"
done
WANTS_AFTER=$(find /etc/systemd/system -path '*.wants/*' 2>/dev/null | sort | tr '\n' ' ')
[ "$WANTS_BEFORE" = "$WANTS_AFTER" ] || fail "purge left the service enabled"
if find /var/lib/systemd -name '*llmd*' 2>/dev/null | grep -q .; then
    fail "purge left deb-systemd-helper state for llmd"
fi
for p in llmd llmd-cuda; do
    dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "install ok" && fail "$p still installed"
done
[ ! -e /usr/lib/x86_64-linux-gnu/libllmd_cuda.so ] || fail "purge left libllmd_cuda.so"
ok "purge leaves the system as it was"
echo "test-packaging: PASS"
