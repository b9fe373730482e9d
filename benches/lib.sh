# Helpers the benchmark scripts source (`. benches/lib.sh`): the blocks every script needs the same way. The caller
# sets WORK (a scratch directory) and PIDS=() and kills "${PIDS[@]}" on exit.

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# wrk prints 1.23ms, 456.78us or 1.02s: in milliseconds
ms() { awk -v s="$1" 'BEGIN {u = (s ~ /us$/) ? 0.001 : (s ~ /ms$/ ? 1 : 1000); sub(/[a-z]+$/, "", s); printf "%.3f", s * u}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
load() { cut -d' ' -f1 /proc/loadavg; }

start() { # port, command...: waits until the port answers (60 s at most)
  local port=$1; shift
  if curl -s -o /dev/null "http://127.0.0.1:$port/"; then echo "port $port is already in use" >&2; exit 1; fi
  "$@" > "$WORK/$port.out" 2> "$WORK/$port.err" &
  PIDS+=($!)
  for _ in $(seq 1200); do curl -s -o /dev/null "http://127.0.0.1:$port/" && return; sleep 0.05; done
  echo "nothing answers on port $port" >&2; cat "$WORK/$port.err" >&2; exit 1
}
stop_last() { kill "${PIDS[-1]}" 2>/dev/null || true; wait "${PIDS[-1]}" 2>/dev/null || true; unset 'PIDS[-1]'; }

# A script whose init is long can make its threads wait for each other (provider.sh): WRK_THREADS is their count,
# WRK_READY an empty directory of this run where each writes a file when ready.
run() { # connections url [wrk args] -> "rps p50_ms p99_ms non2xx"; wrk's output stays in $WORK/wrk.txt
  local c=$1 url=$2; shift 2
  local t=$((c < 2 ? 1 : 2)) ready
  ready=$(mktemp -d -p "$WORK")
  WRK_THREADS=$t WRK_READY=$ready wrk -t"$t" -c"$c" -d"${DURATION}s" --latency "$@" "$url" > "$WORK/wrk.txt" 2>&1 || true
  local rps p50 p99 bad
  rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  p50=$(ms "$(awk '$1=="50%" {print $2}' "$WORK/wrk.txt")")
  p99=$(ms "$(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")")
  bad=$(awk '/Non-2xx/ {print $5}' "$WORK/wrk.txt")
  echo "${rps:-0} $p50 $p99 ${bad:-0}"
}
