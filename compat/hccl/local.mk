# compat/hccl/local.mk: libloom_hccl and <hccl/hccl.h> (issue 21).
