#!/bin/sh
# check.sh: checks the RPMs that `make rpm` built (make test-packaging-rpm).
#
# Usage: check.sh LLMD_RPM [LLMD_CUDA_RPM]
# Reads the packages with rpm -qp only (nothing is installed): the file list
# must be exactly the expected one, the conffile, modes and owners must be
# right, and each scriptlet must do its part.  Prints every failure, then
# exits 1 if there was one.
set -u
rpm_file=$1
cuda_file=${2:-}
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bad() {
    echo "check.sh: FAIL: $*" >&2
    fail=1
}

# same_list NAME EXPECTED_FILE ACTUAL_FILE: the two sorted lists are equal.
same_list() {
    sort "$2" >"$tmp/want"
    sort "$3" >"$tmp/got"
    if ! cmp -s "$tmp/want" "$tmp/got"; then
        bad "$1 file list differs (- expected, + packaged):"
        diff -u "$tmp/want" "$tmp/got" | sed -n 's/^\([-+][^-+]\)/    \1/p' >&2
    fi
}

cat >"$tmp/llmd.want" <<'EOF'
/etc/llmd
/etc/llmd/llmd.conf
/etc/llmd/tls
/usr/bin/llmadmin
/usr/bin/llmd
/usr/lib/systemd/system/llmd.service
/usr/share/bash-completion/completions/llmadmin
/usr/share/licenses/llmd/copyright
/usr/share/man/man5/llmd.conf.5.gz
/usr/share/man/man8/llmadmin.8.gz
/usr/share/man/man8/llmd.8.gz
/var/lib/llmd
EOF
rpm -qpl "$rpm_file" >"$tmp/llmd.got" || bad "rpm -qpl $rpm_file"
same_list llmd "$tmp/llmd.want" "$tmp/llmd.got"

# Modes, owners and flags of the files whose attributes matter.
rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEFLAGS:fflags} %{FILENAMES}\n]' \
    "$rpm_file" >"$tmp/attrs"
for want in '-rw-r--r-- root:root cn /etc/llmd/llmd.conf' \
    'drwxr-x--- root:llmd  /etc/llmd/tls' \
    'drwxr-x--- llmd:llmd  /var/lib/llmd' \
    '-rwxr-xr-x root:root  /usr/bin/llmd' \
    '-rwxr-xr-x root:root  /usr/bin/llmadmin' \
    '-rw-r--r-- root:root l /usr/share/licenses/llmd/copyright'; do
    grep -qxF -- "$want" "$tmp/attrs" || bad "attributes: want '$want'"
done

# The scriptlets: each section present and doing its job.
rpm -qp --scripts "$rpm_file" >"$tmp/scripts"
for want in 'preinstall scriptlet' 'postinstall scriptlet' 'preuninstall scriptlet' \
    'postuninstall scriptlet' 'groupadd -r llmd' 'useradd -r -g llmd' \
    'runuser -u llmd -- /usr/bin/llmadmin --db /var/lib/llmd/llmd.db init' \
    'openssl req -x509' '/etc/llmd/tls/key.pem' 'chmod 0640 /etc/llmd/tls/key.pem' \
    '[ -d /run/systemd/system ]' 'systemctl --no-reload enable llmd.service' \
    'systemctl --no-reload disable --now llmd.service' 'systemctl try-restart llmd.service'; do
    grep -qF -- "$want" "$tmp/scripts" || bad "scriptlets lack '$want'"
done
# Every scriptlet is valid sh (they run under /bin/sh, dash on Debian).
for tag in PREIN POSTIN PREUN POSTUN; do
    rpm -qp --qf "%{$tag}\n" "$rpm_file" >"$tmp/$tag.sh"
    sh -n "$tmp/$tag.sh" || bad "$tag scriptlet is not valid sh"
done
# Enabled but never started by the package: a model must be configured first.
if grep -Eq 'systemctl (--no-reload )?(start|restart|enable --now)' "$tmp/scripts"; then
    bad "scriptlets start the service"
fi
# Nothing on erase deletes the data (RPM has no purge).
if grep -Eq 'rm -[a-z]*r[a-z]* .*(/var/lib/llmd|/etc/llmd)|userdel|groupdel' "$tmp/scripts"; then
    bad "scriptlets delete data or the llmd user"
fi

if [ -n "$cuda_file" ]; then
    echo /usr/lib64/libllmd_cuda.so >"$tmp/cuda.want"
    rpm -qpl "$cuda_file" >"$tmp/cuda.got" || bad "rpm -qpl $cuda_file"
    same_list llmd-cuda "$tmp/cuda.want" "$tmp/cuda.got"
    rpm -qpR "$cuda_file" >"$tmp/cuda.req"
    grep -qx 'llmd = .*' "$tmp/cuda.req" || bad "llmd-cuda does not require llmd"
    grep -q '^libcudart' "$tmp/cuda.req" || bad "llmd-cuda does not require the CUDA runtime"
    rpm -qp --scripts "$cuda_file" | grep -q ldconfig || bad "llmd-cuda does not run ldconfig"
    # The main package must not drag CUDA in.
    if rpm -qpR "$rpm_file" | grep -Eq '^lib(cuda|cublas)'; then
        bad "llmd requires CUDA libraries"
    fi
fi

[ "$fail" -eq 0 ] && echo "check.sh: rpm packages OK"
exit "$fail"
