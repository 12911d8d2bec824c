/* probe.h - `loom-ranktable probe`: live validation of a rank table.
 *
 * One process per rank. The ranks rendezvous at rank 0's table endpoint
 * (a rank whose table differs is named), then every pair connects and
 * measures latency and bandwidth, in rounds where each rank is in at most
 * one pair. Rank 0 prints the matrices; see docs/probe.md. */
#ifndef LOOM_PROBE_H
#define LOOM_PROBE_H

/* argv[0] is "probe". Returns the process exit status: 0 every pair
 * reachable, 1 a pair unreachable or the probe failed, 2 bad command line. */
int loom_probe_main(int argc, char **argv);

/* The round-robin schedule (circle method). With n ranks there are
 * loom_probe_nrounds(n) rounds (n - 1 for even n, n for odd n); in each,
 * loom_probe_peer gives rank's partner, or -1 when it sits the round out.
 * Over all rounds every pair meets exactly once. */
int loom_probe_nrounds(int n);
int loom_probe_peer(int n, int round, int rank);

#endif
