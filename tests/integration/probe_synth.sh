#!/bin/sh
# probe_synth.sh N PER_SERVER - print a made-up `loom-ranktable probe --json`
# report of N ranks, PER_SERVER to a server (10.0.S.1.. on server 10.0.S.0),
# for `probe --from-json` (the report and the heat map without a cluster):
#   - within a server ~20 GB/s, between servers ~10 GB/s (seeded noise);
#   - the second server's ports are blocked for the others: every connect
#     from another server to it times out (its own connects work);
#   - the last rank did not join (its row is not known; the others reach it);
#   - three slow links at ~2 GB/s.
# POSIX sh and awk only.
n=${1:?usage: probe_synth.sh N PER_SERVER}
per=${2:?usage: probe_synth.sh N PER_SERVER}
awk -v n="$n" -v per="$per" 'BEGIN {
    srand(42)
    ns = int((n + per - 1) / per)
    blocked = ns > 1 ? 1 : -1          # the second server
    gone = n - 1                       # the rank that did not join
    for (r = 0; r < n; r++) srv[r] = int(r / per)
    for (a = 0; a < n; a++)
        for (b = 0; b < n; b++) {
            if (a == b) { reach[a, b] = "null"; continue }
            if (a == gone) reach[a, b] = "null"
            else if (srv[b] == blocked && srv[a] != blocked) reach[a, b] = "\"timeout\""
            else reach[a, b] = "\"ok\""
        }
    nslow = 0
    for (a = 0; a < n; a++)
        for (b = 0; b < n; b++) {
            ok = a != b && reach[a, b] == "\"ok\"" && reach[b, a] == "\"ok\""
            if (!ok) { bw[a, b] = lat[a, b] = "null"; continue }
            base = srv[a] == srv[b] ? 20 : 10
            bw[a, b] = sprintf("%.3f", base * (0.9 + 0.2 * rand()))
            lat[a, b] = sprintf("%.3f", (srv[a] == srv[b] ? 8 : 25) * (0.9 + 0.2 * rand()))
        }
    # three slow pairs, both directions
    for (k = 1; k <= 3 && n > 4; k++) {
        a = (k * 7) % n; b = (k * 13 + 3) % n
        if (bw[a, b] == "null" || a == b) continue
        bw[a, b] = bw[b, a] = sprintf("%.3f", 1.5 + rand())
    }
    printf "{\n\"file\": \"synthetic-%d.json\", \"ranks\": %d, \"servers\": %d,\n", n, n, ns
    printf "\"table_hash\": \"0x0000000000000000\", \"size\": 4194304, \"iters\": 10, \"timeout\": 5, \"join_timeout\": 120,\n"
    printf "\"endpoints\": ["
    for (r = 0; r < n; r++) printf "%s\"10.0.%d.%d:29600\"", r ? ", " : "", srv[r], r % per + 1
    printf "],\n\"server_of\": ["
    for (r = 0; r < n; r++) printf "%s%d", r ? ", " : "", srv[r]
    printf "],\n\"server_list\": ["
    for (s = 0; s < ns; s++) printf "%s{\"server_id\": \"10.0.%d.0\"}", s ? ", " : "", s
    printf "],\n\"joined\": ["
    for (r = 0; r < n; r++) printf "%s%s", r ? ", " : "", r == gone ? "false" : "true"
    printf "],\n"
    split("latency_us bandwidth_gbps reach", keys, " ")
    for (k = 1; k <= 3; k++) {
        printf "\"%s\": [", keys[k]
        for (a = 0; a < n; a++) {
            printf "%s[", a ? ",\n" : ""
            for (b = 0; b < n; b++)
                printf "%s%s", b ? ", " : "", k == 1 ? lat[a, b] : k == 2 ? bw[a, b] : reach[a, b]
            printf "]"
        }
        printf "],\n"
    }
    printf "\"unreachable\": [], \"slow\": [], \"ok\": false\n}\n"
}'
