# e2esplit.awk turns BenchmarkEndToEnd, BenchmarkOpenState and
# BenchmarkLatency output (one
# line per round, a metric per variant) into one line per variant
# (/v=<variant>), for benchstat -col /v.
/^Benchmark(EndToEnd|OpenState|Latency)/ {
	name = $1; cpu = ""
	if (match(name, /-[0-9]+$/)) { cpu = substr(name, RSTART); name = substr(name, 1, RSTART-1) }
	for (i = 5; i < NF; i += 2) {
		u = $(i+1); v = u
		if (sub(/-msg\/s$/, "", v)) print name "/v=" v cpu " 1 " $i " msg/s"
		else if (sub(/-cpu-ns\/msg$/, "", v)) print name "/v=" v cpu " 1 " $i " cpu-ns/msg"
		else if (sub(/-B\/diverted$/, "", v)) print name "/v=" v cpu " 1 " $i " B/diverted"
		else if (sub(/-allocs\/msg$/, "", v)) print name "/v=" v cpu " 1 " $i " allocs/msg"
		else if (sub(/-goroutines\/msg$/, "", v)) print name "/v=" v cpu " 1 " $i " goroutines/msg"
		else if (sub(/-p50-ns$/, "", v)) print name "/v=" v cpu " 1 " $i " p50-ns"
		else if (sub(/-p99-ns$/, "", v)) print name "/v=" v cpu " 1 " $i " p99-ns"
	}
	next
}
{ print }
