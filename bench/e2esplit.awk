# e2esplit.awk turns BenchmarkEndToEnd and BenchmarkOpenState output (one
# line per round, a metric per variant) into one line per variant
# (/v=<variant>), for benchstat -col /v.
/^Benchmark(EndToEnd|OpenState)/ {
	name = $1; cpu = ""
	if (match(name, /-[0-9]+$/)) { cpu = substr(name, RSTART); name = substr(name, 1, RSTART-1) }
	for (i = 5; i < NF; i += 2) {
		u = $(i+1); v = u
		if (sub(/-msg\/s$/, "", v)) print name "/v=" v cpu " 1 " $i " msg/s"
		else if (sub(/-cpu-ns\/msg$/, "", v)) print name "/v=" v cpu " 1 " $i " cpu-ns/msg"
		else if (sub(/-B\/diverted$/, "", v)) print name "/v=" v cpu " 1 " $i " B/diverted"
	}
	next
}
{ print }
