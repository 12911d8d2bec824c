/*
 * acl/acl.h - the ACL runtime on plain hosts (libloom_acl): what CANN's
 * acl/acl.h gives HCCL programs. See acl/acl_rt.h.
 */
#ifndef LOOM_ACL_H
#define LOOM_ACL_H

#include <acl/acl_base.h>
#include <acl/acl_rt.h>

#endif /* LOOM_ACL_H */
