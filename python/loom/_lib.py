"""_lib.py - libloom loaded through ctypes, and the prototypes of its calls.

The library is loaded with RTLD_GLOBAL: loom.torch's C++ extension takes
Loom's symbols from it, so one copy of Loom serves both. Where it is:
LOOM_LIBRARY (a path), else the directory _paths.py names (written by the
build: the build tree's .libs, or $(libdir) once installed), else the
loader's search path.
"""
import ctypes
import ctypes.util
import os

c_int, c_uint64, c_size_t, c_void_p, c_char_p, c_double = (
    ctypes.c_int, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p,
    ctypes.c_char_p, ctypes.c_double)

UNIQUE_ID_BYTES = 128


def _candidates():
    env = os.environ.get("LOOM_LIBRARY")
    if env:
        yield env
        return
    try:
        from . import _paths
        yield os.path.join(_paths.LIBDIR, "libloom.so.0")
        yield os.path.join(_paths.LIBDIR, "libloom.so")
    except ImportError:
        pass
    found = ctypes.util.find_library("loom")
    if found:
        yield found
    yield "libloom.so.0"


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("loom: cannot load libloom (set LOOM_LIBRARY to its path): " +
                      "; ".join(errors))


lib = _load()


class RedopAttr(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("base", c_int), ("prescale", c_double),
                ("postscale", c_double), ("accumulate", c_int)]


class ShrinkParams(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("flags", c_int), ("exclude", c_void_p),
                ("nexclude", c_int), ("timeout", c_double)]


class CommOpts(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("timeout", ctypes.c_double),
                ("nranks", c_int)]


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


_PROTOS = {
    "loom_result_string": (c_char_p, [c_int]),
    "loom_get_error_string": (c_char_p, [c_void_p]),
    "loom_get_version": (c_int, [ctypes.POINTER(c_int), ctypes.POINTER(c_char_p)]),
    "loom_get_features": (c_int, [ctypes.POINTER(c_char_p)]),
    "loom_comm_init_ranktable": (c_int, [c_char_p, c_int, ctypes.POINTER(c_void_p)]),
    "loom_comm_init_ranktable_opts": (c_int, [c_char_p, c_int, ctypes.POINTER(CommOpts),
                                              ctypes.POINTER(c_void_p)]),
    "loom_comm_init_url": (c_int, [c_char_p, c_int, c_int, ctypes.POINTER(c_void_p)]),
    "loom_comm_init_env": (c_int, [ctypes.POINTER(c_void_p)]),
    "loom_get_unique_id": (c_int, [ctypes.POINTER(UniqueId)]),
    "loom_get_unique_id_toward": (c_int, [c_char_p, ctypes.POINTER(UniqueId)]),
    "loom_comm_init_rank": (c_int, [ctypes.POINTER(c_void_p), c_int,
                                    ctypes.POINTER(UniqueId), c_int]),
    "loom_comm_destroy": (c_int, [c_void_p]),
    "loom_comm_abort": (c_int, [c_void_p]),
    "loom_comm_revoke": (c_int, [c_void_p]),
    "loom_comm_shrink_ext": (c_int, [c_void_p, c_void_p, ctypes.POINTER(c_void_p)]),
    "loom_comm_rank": (c_int, [c_void_p, ctypes.POINTER(c_int)]),
    "loom_comm_size": (c_int, [c_void_p, ctypes.POINTER(c_int)]),
    "loom_comm_local_rank": (c_int, [c_void_p, ctypes.POINTER(c_int)]),
    "loom_comm_local_size": (c_int, [c_void_p, ctypes.POINTER(c_int)]),
    "loom_comm_split": (c_int, [c_void_p, c_int, c_int, ctypes.POINTER(c_void_p)]),
    "loom_allreduce": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_int, c_void_p,
                               c_void_p]),
    "loom_allgather": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_void_p, c_void_p]),
    "loom_broadcast": (c_int, [c_void_p, c_uint64, c_int, c_int, c_void_p, c_void_p]),
    "loom_reduce_scatter": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_int, c_void_p,
                                    c_void_p]),
    "loom_reduce": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_int, c_int, c_void_p,
                            c_void_p]),
    "loom_barrier": (c_int, [c_void_p, c_void_p]),
    "loom_send": (c_int, [c_void_p, c_uint64, c_int, c_int, c_void_p, c_void_p]),
    "loom_recv": (c_int, [c_void_p, c_uint64, c_int, c_int, c_void_p, c_void_p]),
    "loom_alltoall": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_void_p, c_void_p]),
    "loom_gather": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_int, c_void_p, c_void_p]),
    "loom_scatter": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_int, c_void_p, c_void_p]),
    "loom_group_start": (c_int, []),
    "loom_group_end": (c_int, []),
    "loom_redop_create": (c_int, [ctypes.POINTER(RedopAttr), ctypes.POINTER(c_int)]),
    "loom_redop_destroy": (c_int, [c_int]),
    "loom_stream_create_host": (c_int, [ctypes.POINTER(c_void_p)]),
    "loom_stream_synchronize": (c_int, [c_void_p]),
    "loom_stream_destroy": (c_int, [c_void_p]),
    "loom_request_create": (c_int, [c_void_p, c_void_p, c_void_p, ctypes.POINTER(c_void_p)]),
    "loom_request_test": (c_int, [c_void_p]),
    "loom_request_wait": (c_int, [c_void_p]),
    "loom_request_wait_timeout": (c_int, [c_void_p, c_int]),
    "loom_request_free": (c_int, [c_void_p]),
}

for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
