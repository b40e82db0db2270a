#!/bin/sh
# Run HAProxy in front of N `lean-beam-mcp --http` replicas on this machine, in the foreground; Ctrl-C stops all.
#
#   deploy/haproxy/run.sh [REPLICAS]         REPLICAS: 1 to 3 (default 3)
#
# Clients use http://$BEAM_LB_BIND/mcp. Environment (all optional):
#   BEAM_LB_BIND        address clients connect to (default 127.0.0.1:8765)
#   BEAM_LB_STATS       HAProxy's stats page (default 127.0.0.1:8764, at /stats)
#   BEAM_REPLICA_PORT   first replica port (default 8801; replica i listens on 127.0.0.1:PORT+i-1)
#   LEAN_BEAM_MCP       the server command (default lean-beam-mcp); its further arguments, e.g. --lean-cmd,
#                       go after a `--`: deploy/haproxy/run.sh 3 -- --lean-cmd "lake serve"
# Replicas log to stderr; a replica that dies is taken out by HAProxy (see docs/deploy.md) and not restarted
# here: use a supervisor (systemd, Kubernetes) for that.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
replicas=${1:-3}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
case $replicas in 1|2|3) ;; *) echo "usage: $0 [1|2|3] [-- lean-beam-mcp arguments]" >&2; exit 2 ;; esac

export BEAM_LB_BIND="${BEAM_LB_BIND:-127.0.0.1:8765}"
export BEAM_LB_STATS="${BEAM_LB_STATS:-127.0.0.1:8764}"
port=${BEAM_REPLICA_PORT:-8801}
server=${LEAN_BEAM_MCP:-lean-beam-mcp}
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)

pids=""
cleanup() {
    trap - INT TERM EXIT
    for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
    wait
}
trap cleanup INT TERM EXIT

i=1
while [ "$i" -le "$replicas" ]; do
    address="127.0.0.1:$((port + i - 1))"
    "$server" --http "$address" "$@" &
    pids="$pids $!"
    export "BEAM_REPLICA_$i=$address"
    i=$((i + 1))
done

echo "run.sh: $replicas replica(s); MCP endpoint http://$BEAM_LB_BIND/mcp, stats http://$BEAM_LB_STATS/stats" >&2
"$haproxy" -db -f "$here/haproxy.cfg" &
pids="$pids $!"
wait
