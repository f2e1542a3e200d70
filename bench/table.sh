#!/bin/sh
# table.sh runs the wave-7 table (docs/bench.md, "When traffic changes"):
# every generated shape, seeds 1-3, from empty (--no-history) and after a
# learned day (--warmup 24h), at the settings the table was measured at, and
# prints one line per run: shape seed mode p95_s utilization boots over
# clairvoyant clairvoyant_boots, where over is the share of the measured jobs
# that waited longer than 15 s (p95 <= 15 s is over <= 0.05) and clairvoyant
# is the utilization of the zero-wait schedule that knows every job in
# advance (docs/bench.md, "The clairvoyant reference"), with its boots.
#
# A policy change is judged on all 60 runs against the unchanged binary, so
# a gain on one shape cannot hide a loss on another:
#
#	go build -o /tmp/berth-base ./cmd/berth     # before the change
#	go build -o /tmp/berth-new ./cmd/berth      # after it
#	bench/table.sh /tmp/berth-base /tmp/table > base.txt
#	bench/table.sh /tmp/berth-new /tmp/table > new.txt
#	bench/table.sh -diff base.txt new.txt
#
# The diff prints the runs that changed and marks WORSE any with a higher
# p95 or a lower utilization (by more than the 0.0005 the table rounds to);
# it exits 1 if there is one. Traces are generated once into DIR and reused.
# A run takes about a second; JOBS (default 2) run at once, under nice, so a
# shared machine stays usable.
#
# SHAPES replaces the list of shapes (a binary older than the dst shape
# replays the others only). dst is replayed with --timezone America/New_York,
# its team's zone, unless ZONE says otherwise (ZONE=UTC: the profile in UTC).
#
# WARMUP replaces the learned time of the "day" mode (default 24h). On
# teamchange, whose new team starts on Tuesday, WARMUP=48h measures from
# Wednesday: after the new team's first day, as issue 45 counts it (its
# first burst at 14:00 is first sight, which no policy sized from the past
# serves).
#
# POLICY replaces berth's policy flags (default --target-wait 15s). The
# keep-everything reference of docs/bench.md keeps every instance it ever
# booted, suspended, for ever:
#
#	POLICY="--idle-time 0s --suspended-idle-time 10000h" bench/table.sh BIN DIR
set -eu

if [ "${1:-}" = -diff ]; then
	awk 'NR == FNR { p[$1" "$2" "$3] = $4; u[$1" "$2" "$3] = $5; b[$1" "$2" "$3] = $6; next }
	{
		k = $1" "$2" "$3
		if (!(k in p)) { print "missing in base: " k; bad = 1; next }
		worse = ($4 > p[k] || $5 < u[k] - 0.0005)
		if (worse) bad = 1
		if ($4 != p[k] || $5 != u[k] || $6 != b[k])
			printf "%-10s %s %-5s p95 %3d -> %3d  util %.3f -> %.3f  boots %5d -> %5d%s\n",
				$1, $2, $3, p[k], $4, u[k], $5, b[k], $6, worse ? "  WORSE" : ""
	}
	END { exit bad }' "$2" "$3"
	exit
fi

bin=${1:?usage: table.sh BIN DIR | table.sh -diff BASE NEW}
dir=${2:?usage: table.sh BIN DIR | table.sh -diff BASE NEW}
shapes=${SHAPES:-"office monorepo nightly poisson weekend lowvolume teamchange growth twooffices release dst"}
mkdir -p "$dir"
for s in $shapes; do
	for n in 1 2 3; do
		[ -f "$dir/$s-$n.csv" ] || "$bin" bench generate "$s" "$dir/$s-$n.csv" --seed "$n" >/dev/null
	done
done

for s in $shapes; do
	for n in 1 2 3; do
		for m in empty day; do echo "$s $n $m"; done
	done
done | xargs -P "${JOBS:-2}" -L 1 sh -c '
	s=$0 n=$1 m=$2
	if [ "$m" = day ]; then hist="--warmup '"${WARMUP:-24h}"'"; else hist=--no-history; fi
	if [ "$s" = dst ]; then hist="$hist --timezone '"${ZONE:-America/New_York}"'"; fi
	jobs=$(mktemp)
	out=$(nice -n 10 "'"$bin"'" bench --trace "'"$dir"'/$s-$n.csv" --boot-time 60s \
		--resume-time 10s --suspended-cost 0.1 --max-instances 1000 --jobs "$jobs" \
		'"${POLICY:---target-wait 15s}"' $hist --json)
	p95=$(echo "$out" | tr -d " \n" | sed "s/.*\"wait_p95_s\":\([0-9.]*\).*/\1/")
	util=$(echo "$out" | tr -d " \n" | sed "s/.*\"utilization\":\([0-9.e-]*\).*/\1/")
	boots=$(echo "$out" | tr -d " \n" | sed "s/.*\"boots\":\([0-9]*\).*/\1/")
	cv=$(echo "$out" | tr -d " \n" | sed "s/.*\"clairvoyant_utilization\":\([0-9.e-]*\).*/\1/")
	cvboots=$(echo "$out" | tr -d " \n" | sed "s/.*\"clairvoyant_boots\":\([0-9]*\).*/\1/")
	over=$(awk -F, "\$5 == \"measured\" { n++; if (\$4 > 15) w++ } END { printf \"%.4f\", w / n }" "$jobs")
	rm -f "$jobs"
	printf "%s %s %s %s %.4f %s %s %.4f %s\n" "$s" "$n" "$m" "$p95" "$util" "$boots" "$over" "$cv" "$cvboots"
' | sort -k1,1 -k2,2n -k3,3
