#!/bin/sh
# scripts/run.sh MODEL [BIN_DIR] — `make run`: serves MODEL with llmd over
# HTTPS on 127.0.0.1:8443, in the foreground (Ctrl-C drains and stops it).
#
# Everything it needs lives in run/ (git-ignored) and is made only when
# missing, so a second `make run` reuses the same certificate, database and
# demo key: a self-signed certificate (run/cert.pem, run/key.pem), a DB with
# tenant "demo" (run/llmd.db) and that tenant's API key (run/demo.key, mode
# 600).  `rm -rf run` starts over.
set -eu

model=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
bin=${2:-build/bin}
dir=run
listen=127.0.0.1:8443
db=$dir/llmd.db
tmp=""

cleanup() {
    [ -z "$tmp" ] || rm -f "$tmp" "$tmp-wal" "$tmp-shm" "$tmp-journal"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for f in "$bin/llmd" "$bin/llmadmin"; do
    [ -x "$f" ] || { echo "run: $f is missing: run 'make' first" >&2; exit 1; }
done
[ -f "$model" ] || { echo "run: model $model is missing: run 'make model' first" >&2; exit 1; }

umask 077
mkdir -p "$dir"

if [ ! -s "$dir/cert.pem" ] || [ ! -s "$dir/key.pem" ]; then
    echo "run: making a self-signed certificate for 127.0.0.1 and localhost"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
        -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
        -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
fi

# The key is printed by llmadmin once, as JSON; only its "key" field is kept.
new_key() {
    "$bin/llmadmin" --db "$1" --json key create demo |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])'
}

if [ ! -f "$db" ]; then
    # Built under another name and moved into place whole, so that an
    # interrupted first run never leaves a DB without its demo key.
    echo "run: making $db with tenant demo"
    tmp=$dir/llmd.db.new
    cleanup
    "$bin/llmadmin" --db "$tmp" init >/dev/null
    "$bin/llmadmin" --db "$tmp" tenant add demo >/dev/null
    new_key "$tmp" >"$dir/demo.key.new"
    mv "$dir/demo.key.new" "$dir/demo.key"
    mv "$tmp" "$db"
    tmp=""
elif [ ! -s "$dir/demo.key" ]; then
    echo "run: $dir/demo.key is missing: making a new key for tenant demo"
    new_key "$db" >"$dir/demo.key.new"
    mv "$dir/demo.key.new" "$dir/demo.key"
fi
chmod 600 "$dir/demo.key"

key=$(cat "$dir/demo.key")
name=$(basename "$model" .gguf)
cert=$(cd "$dir" && pwd)/cert.pem
url=https://$listen

cat <<EOT

llmd will serve $name at $url (TLS, self-signed: $cert).
Demo API key (tenant "demo", kept in $dir/demo.key):

    $key

Call it with curl:

    curl --cacert $cert $url/v1/chat/completions \\
      -H "Authorization: Bearer \$(cat $(pwd)/$dir/demo.key)" -H "Content-Type: application/json" \\
      -d '{"model": "$name", "max_tokens": 64, "messages": [{"role": "user", "content": "Hello!"}]}'

    (add "stream": true and curl -N for server-sent events)

or with the openai Python SDK (pip install openai):

    import ssl, openai
    client = openai.OpenAI(
        base_url="$url/v1", api_key="$key",
        http_client=openai.DefaultHttpxClient(
            verify=ssl.create_default_context(cafile="$cert")))
    r = client.chat.completions.create(
        model="$name", max_tokens=64, messages=[{"role": "user", "content": "Hello!"}])
    print(r.choices[0].message.content)

More tenants and keys: $bin/llmadmin --db $db tenant add NAME; $bin/llmadmin --db $db key create NAME
Ctrl-C stops the server (running requests get to finish first).

EOT

trap - EXIT INT TERM
exec "$bin/llmd" --model "$model" --listen "$listen" --tls-cert "$dir/cert.pem" \
    --tls-key "$dir/key.pem" --db "$db" --admin-socket "$dir/admin.sock"
