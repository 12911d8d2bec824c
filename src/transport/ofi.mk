# src/transport/ofi.mk: the libfabric transport (issue 17), built when
# configure finds libfabric (HAVE_OFI). Its sources are the only files that
# include <rdma/fabric.h>.
