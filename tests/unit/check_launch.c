/* check_launch.c - reading a launcher's variables (src/core/launch.c): the
 * order of the rank/size pairs, bad values named, one-host detection, the
 * job id and the port derived from it. Each test starts from an
 * environment without any launcher variable. */
#include "build_config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "launch.h"

static const char *const all_vars[] = {
    "LOOM_RANK", "LOOM_NRANKS", "RANK_ID", "RANK_SIZE", "RANK", "WORLD_SIZE",
    "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_num_nodes",
    "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE",
    "MPI_LOCALNRANKS", "PMI_KVSNAME", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_ID", "SLURM_STEP_ID",
};

static void setup(void)
{
    for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
        unsetenv(all_vars[i]);
}

static struct loom_launch read_ok(void)
{
    struct loom_launch l;
    char err[256] = "";
    loom_result_t res = loom_launch_read(&l, err, sizeof err);
    ck_assert_msg(res == LOOM_SUCCESS, "%s", err);
    return l;
}

START_TEST(test_nothing)
{
    struct loom_launch l = read_ok();
    ck_assert_int_eq(l.rank, -1);
    ck_assert_int_eq(l.nranks, -1);
    ck_assert_ptr_null(l.rank_var);
    ck_assert_int_eq(l.one_host, 0);
    ck_assert_str_eq(l.job_id, "");
    int rank = 7;
    char err[64];
    ck_assert_int_eq(loom_launch_rank(&rank, NULL, err, sizeof err), 1);
}
END_TEST

/* Open MPI on one host: rank, size, local size, job id. */
START_TEST(test_openmpi)
{
    setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    setenv("OMPI_MCA_ess_base_jobid", "1703739393", 1);
    setenv("PMIX_NAMESPACE", "other", 1);
    struct loom_launch l = read_ok();
    ck_assert_int_eq(l.rank, 2);
    ck_assert_int_eq(l.nranks, 4);
    ck_assert_str_eq(l.rank_var, "OMPI_COMM_WORLD_RANK");
    ck_assert_str_eq(l.size_var, "OMPI_COMM_WORLD_SIZE");
    ck_assert_int_eq(l.one_host, 1);
    ck_assert_str_eq(l.job_id, "1703739393");
    ck_assert_str_eq(l.job_id_var, "OMPI_MCA_ess_base_jobid");
    /* two hosts: 2 of the 4 ranks here */
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    ck_assert_int_eq(read_ok().one_host, 0);
    /* the node count wins over the local size */
    setenv("OMPI_MCA_orte_num_nodes", "1", 1);
    ck_assert_int_eq(read_ok().one_host, 1);
    /* Open MPI 5 has no ess job id: the PMIx namespace */
    unsetenv("OMPI_MCA_ess_base_jobid");
    ck_assert_str_eq(read_ok().job_id, "other");
}
END_TEST

/* A pair earlier in the order wins, whole: RANK with WORLD_SIZE, never
 * RANK with OMPI_COMM_WORLD_SIZE. */
START_TEST(test_order)
{
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
    setenv("RANK", "3", 1);
    struct loom_launch l = read_ok();
    ck_assert_int_eq(l.rank, 3);
    ck_assert_int_eq(l.nranks, -1);
    ck_assert_str_eq(l.size_var, "WORLD_SIZE");
    setenv("WORLD_SIZE", "5", 1);
    ck_assert_int_eq(read_ok().nranks, 5);
    setenv("LOOM_RANK", "0", 1);
    setenv("LOOM_NRANKS", "2", 1);
    l = read_ok();
    ck_assert_int_eq(l.rank, 0);
    ck_assert_int_eq(l.nranks, 2);
    ck_assert_str_eq(l.launcher, "loom-run");
    int rank = -1;
    const char *var = NULL;
    char err[64];
    ck_assert_int_eq(loom_launch_rank(&rank, &var, err, sizeof err), 0);
    ck_assert_int_eq(rank, 0);
    ck_assert_str_eq(var, "LOOM_RANK");
}
END_TEST

START_TEST(test_bad_values)
{
    struct loom_launch l;
    char err[256] = "";
    setenv("RANK", "x1", 1);
    ck_assert_int_eq(loom_launch_read(&l, err, sizeof err), LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "RANK=x1 is not a rank number");
    int rank;
    ck_assert_int_eq(loom_launch_rank(&rank, NULL, err, sizeof err), -1);
    setenv("RANK", "4", 1);
    setenv("WORLD_SIZE", "4", 1);
    ck_assert_int_eq(loom_launch_read(&l, err, sizeof err), LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "RANK=4 is not below WORLD_SIZE=4");
    setenv("WORLD_SIZE", "0", 1);
    ck_assert_int_eq(loom_launch_read(&l, err, sizeof err), LOOM_ERROR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "WORLD_SIZE=0 is not a number of ranks");
    /* empty counts as unset */
    setenv("RANK", "", 1);
    ck_assert_int_eq(read_ok().rank, -1);
}
END_TEST

/* srun: SLURM_PROCID/NTASKS, one node by the step or the allocation, and
 * "JOB.STEP" as the id. */
START_TEST(test_slurm)
{
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    setenv("SLURM_STEP_ID", "3", 1);
    setenv("SLURM_NNODES", "2", 1);
    struct loom_launch l = read_ok();
    ck_assert_int_eq(l.rank, 5);
    ck_assert_int_eq(l.nranks, 8);
    ck_assert_str_eq(l.launcher, "srun");
    ck_assert_int_eq(l.one_host, 0);
    ck_assert_str_eq(l.job_id, "4242.3");
    setenv("SLURM_NNODES", "1", 1);
    ck_assert_int_eq(read_ok().one_host, 1);
    setenv("SLURM_STEP_NUM_NODES", "2", 1);
    ck_assert_int_eq(read_ok().one_host, 0);
}
END_TEST

/* torchrun and MPICH's hydra: the local world size. */
START_TEST(test_torch_and_pmi)
{
    setenv("PMI_RANK", "1", 1);
    setenv("PMI_SIZE", "3", 1);
    setenv("MPI_LOCALNRANKS", "3", 1);
    struct loom_launch l = read_ok();
    ck_assert_str_eq(l.rank_var, "PMI_RANK");
    ck_assert_int_eq(l.one_host, 1);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("TORCHELASTIC_RUN_ID", "abc", 1);
    l = read_ok();
    ck_assert_str_eq(l.rank_var, "RANK");
    ck_assert_int_eq(l.one_host, 0);
    ck_assert_str_eq(l.job_id, "abc");
}
END_TEST

/* The same id gives the same port, outside the ephemeral range; other ids
 * spread over the range. */
START_TEST(test_job_port)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        ck_assert_int_eq(fscanf(f, "%d %d", &lo, &hi), 2);
        fclose(f);
    }
    int p = loom_launch_job_port("1703739393");
    ck_assert_int_eq(p, loom_launch_job_port("1703739393"));
    ck_assert_int_ge(p, 1024);
    ck_assert_int_le(p, 65535);
    int distinct = 0;
    for (int i = 0; i < 100; i++) {
        char id[32];
        snprintf(id, sizeof id, "job-%d", i);
        int q = loom_launch_job_port(id);
        ck_assert_msg(q < lo || q > hi || (lo - 10000 < 1024 && 65535 - hi < 1024),
                      "port %d in the ephemeral range %d-%d", q, lo, hi);
        ck_assert_int_ge(q, 1024);
        ck_assert_int_le(q, 65535);
        distinct += q != p;
    }
    ck_assert_int_ge(distinct, 98);
}
END_TEST

static Suite *launch_suite(void)
{
    Suite *s = suite_create("launch");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_nothing);
    tcase_add_test(tc, test_openmpi);
    tcase_add_test(tc, test_order);
    tcase_add_test(tc, test_bad_values);
    tcase_add_test(tc, test_slurm);
    tcase_add_test(tc, test_torch_and_pmi);
    tcase_add_test(tc, test_job_port);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(launch_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
