# src/transport/verbs.mk: the libibverbs transport (issue 18), built when
# configure finds libibverbs (HAVE_VERBS). Its sources are the only files
# that include <infiniband/verbs.h>.
