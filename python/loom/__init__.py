"""loom - Loom's collectives on numpy arrays and torch tensors.

    import numpy as np, loom
    comm = loom.init("tcp://127.0.0.1:29500", size=2, rank=r)   # or env://,
    x = np.arange(4, dtype=np.float32)                          # a rank table,
    comm.allreduce(x)                  # in place: x summed     # a unique id
    y = comm.allgather(x)              # a new (size, 4) array
    h = comm.allreduce(x, op=loom.MAX, async_op=True); h.wait()
    with loom.group():                 # one op: sends/receives progress
        comm.send(x, peer=1); comm.recv(z, peer=1)                # together

Buffers are C-contiguous numpy arrays or CPU torch tensors, used in place
(never converted: a dtype Loom lacks is a TypeError). Out-of-place calls take
``out=``; calls that produce a new shape allocate ``out`` when it is not
given. Loom's errors are raised as LoomError (or a subclass) carrying Loom's
message. The PyTorch backend is ``import loom.torch``.
"""
import contextlib
import ctypes
import sys
import threading

from . import _lib
from ._lib import lib

__all__ = ["Comm", "init", "get_unique_id", "group", "redop", "Handle", "LoomError",
           "MismatchError", "TimeoutError", "AbortedError", "RemoteError",
           "SUM", "PROD", "MIN", "MAX", "AVG", "version", "features"]

# ---- results and errors --------------------------------------------------------


class LoomError(RuntimeError):
    """A Loom call failed. ``code`` is the loom_result_t, ``result`` its name;
    the message is Loom's (loom_get_error_string)."""

    def __init__(self, code, message):
        self.code = code
        self.result = lib.loom_result_string(code).decode()
        super().__init__(message or self.result)


class InvalidArgument(LoomError, ValueError):
    pass


class MismatchError(LoomError):
    """Ranks are in different calls (both named in the message)."""


class TimeoutError(LoomError):  # noqa: A001 (Loom's, not the builtin)
    pass


class AbortedError(LoomError):
    pass


class RemoteError(LoomError):
    """A peer failed, closed or reset its link."""


class RevokedError(AbortedError):
    """The communicator was revoked (by this rank or a peer): shrink it."""


_ERRORS = {-1: InvalidArgument, -7: TimeoutError, -8: RemoteError, -10: MismatchError,
           -11: AbortedError, -14: RevokedError}


def _raise(code, handle=None):
    msg = lib.loom_get_error_string(handle)
    msg = msg.decode(errors="replace") if msg else ""
    raise _ERRORS.get(code, LoomError)(code, msg)


def _check(code, handle=None):
    if code < 0:
        _raise(code, handle)
    return code


def version():
    """Loom's version string."""
    code, s = ctypes.c_int(), ctypes.c_char_p()
    _check(lib.loom_get_version(ctypes.byref(code), ctypes.byref(s)))
    return s.value.decode()


def features():
    """What this Loom was built with ("tcp shm ...")."""
    s = ctypes.c_char_p()
    _check(lib.loom_get_features(ctypes.byref(s)))
    return s.value.decode()


# ---- dtypes and buffers -------------------------------------------------------

(INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64, INT16,
 UINT16) = range(12)
_NAMES = {"int8": INT8, "uint8": UINT8, "int32": INT32, "uint32": UINT32, "int64": INT64,
          "uint64": UINT64, "float16": FLOAT16, "bfloat16": BFLOAT16, "float32": FLOAT32,
          "float64": FLOAT64, "int16": INT16, "uint16": UINT16}
_SUPPORTED = ("int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, bfloat16, "
              "float32, float64")


def _numpy():
    return sys.modules.get("numpy")


def _torch():
    return sys.modules.get("torch")


def _buf(x, name, writable=False):
    """(address, element count, Loom dtype) of a numpy array or a torch tensor."""
    np = _numpy()
    if np is not None and isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:
            raise ValueError("loom: %s: the array must be C-contiguous" % name)
        if writable and not x.flags.writeable:
            raise ValueError("loom: %s: the array is read-only" % name)
        dt = _NAMES.get(x.dtype.name) if x.dtype.isnative else None
        if dt is None:
            raise TypeError("loom: %s: dtype %s is not supported (%s)" % (name, x.dtype,
                                                                         _SUPPORTED))
        return x.ctypes.data, x.size, dt
    torch = _torch()
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError("loom: %s: a tensor on %s; this package reads host memory "
                             "(use torch.distributed with backend 'loom' for devices)"
                             % (name, x.device))
        if x.layout != torch.strided or not x.is_contiguous():
            raise ValueError("loom: %s: the tensor must be dense and contiguous" % name)
        dt = _NAMES.get(str(x.dtype).replace("torch.", ""))
        if dt is None:
            raise TypeError("loom: %s: dtype %s is not supported (%s)" % (name, x.dtype,
                                                                         _SUPPORTED))
        return x.data_ptr(), x.numel(), dt
    raise TypeError("loom: %s: a numpy array or a torch tensor, not %s"
                    % (name, type(x).__name__))


def _empty(like, shape):
    np = _numpy()
    if np is not None and isinstance(like, np.ndarray):
        return np.empty(shape, dtype=like.dtype)
    return _torch().empty(shape, dtype=like.dtype)


def _shape(x):
    return tuple(x.shape)


# ---- reduction ops --------------------------------------------------------------

SUM, PROD, MIN, MAX, AVG = range(5)
_OPS = {"sum": SUM, "prod": PROD, "product": PROD, "min": MIN, "max": MAX, "avg": AVG,
        "mean": AVG}


class redop:
    """A reduction op with attributes (loom_redop_create): a sum or average
    that scales its inputs (prescale) and result (postscale), and/or sums
    float16/bfloat16 in float32 (accumulate="float32"; see loom.h)."""

    def __init__(self, base=SUM, prescale=1.0, postscale=1.0, accumulate="native"):
        base = _op(base)
        acc = {"native": 0, "float32": 1}.get(accumulate)
        if acc is None:
            raise ValueError("loom: accumulate is 'native' or 'float32', not %r" % accumulate)
        attr = _lib.RedopAttr(ctypes.sizeof(_lib.RedopAttr), base, float(prescale),
                              float(postscale), acc)
        v = ctypes.c_int()
        _check(lib.loom_redop_create(ctypes.byref(attr), ctypes.byref(v)))
        self.value = v.value

    def __del__(self):
        try:
            lib.loom_redop_destroy(self.value)
        except Exception:  # interpreter shutting down
            pass


def _op(op):
    if isinstance(op, redop):
        return op.value
    if isinstance(op, str):
        if op.lower() not in _OPS:
            raise ValueError("loom: op %r is not one of %s" % (op, ", ".join(_OPS)))
        return _OPS[op.lower()]
    if isinstance(op, int) and 0 <= op <= AVG:
        return op
    raise ValueError("loom: op %r is not a Loom reduction op" % (op,))


# ---- groups and handles ------------------------------------------------------

_tls = threading.local()


class _Group:
    def __init__(self, async_op):
        self.async_op = async_op
        self.comms = []
        self.keep = []
        self.handles = []

    def wait(self):
        for h in self.handles:
            h.wait()


@contextlib.contextmanager
def group(async_op=False):
    """Calls inside run as one op per communicator when the block ends
    (loom_group_start/end): sends and receives progress together and small
    allreduces coalesce into one. Buffers must live until the group has
    completed: at the end of the block, or with async_op=True once the
    object it yields has been waited on (g.wait())."""
    outer = getattr(_tls, "group", None)
    g = outer or _Group(async_op)
    _check(lib.loom_group_start())
    _tls.group = g
    ok = False
    try:
        yield g
        ok = True
    finally:
        _tls.group = outer
        res = lib.loom_group_end()
        if outer is None and ok and res >= 0 and g.async_op:
            for c in g.comms:
                g.handles.append(c._request(g.keep, None))
        if ok:
            if res < 0:
                _raise(res, g.comms[0]._h if g.comms else None)


_NOT_READY = 1          # LOOM_NOT_READY
_WAIT_SLICE_MS = 100    # how long a signal may wait for its handler to run


class Handle:
    """An asynchronous call: wait() returns its result (the output buffer),
    is_completed() polls. Keeps the call's buffers alive until complete."""

    def __init__(self, comm, req, keep, result):
        self._comm, self._req, self._keep, self._result = comm, req, keep, result
        self._done = False

    def is_completed(self):
        if self._done:
            return True
        res = lib.loom_request_test(self._req)
        if res == 1:
            return False
        self._finish(res)
        return True

    test = is_completed

    def wait(self):
        if not self._done:
            if threading.current_thread() is threading.main_thread():
                self._finish(self._wait_slices())
            else:
                self._finish(lib.loom_request_wait(self._req))
        return self._result

    def _wait_slices(self):
        # Python runs signal handlers on the main thread between bytecodes,
        # never inside a C call: waiting in slices lets Ctrl-C raise
        # KeyboardInterrupt here (and a handler of the program's run). A
        # collective cannot be left half done, so the communicator is
        # aborted (its peers' calls fail, naming this rank) and the call
        # waited for, since Loom may still write the buffers it keeps.
        try:
            while True:
                res = lib.loom_request_wait_timeout(self._req, _WAIT_SLICE_MS)
                if res != _NOT_READY:
                    return res
        except BaseException:
            lib.loom_comm_abort(self._comm._h)
            lib.loom_request_wait(self._req)
            self._done = True
            self._keep = None
            raise

    def _finish(self, res):
        self._done = True
        self._keep = None
        if res < 0:
            _raise(res, self._comm._h)

    def __del__(self):
        try:
            if self._req:
                if not self._done:
                    # Loom may still write the buffers this handle keeps alive
                    lib.loom_request_wait(self._req)
                lib.loom_request_free(self._req)
        except Exception:  # interpreter shutting down
            pass


# ---- communicators -----------------------------------------------------------


def get_unique_id(toward=None):
    """A fresh unique id (bytes): made on one process (rank 0's, whose host
    then listens for the others), passed to every rank by any means, used
    with init(unique_id=...). toward: a host every rank reaches (the
    framework's rendezvous host); the id takes this host's address on the
    route to it ("127.0.0.1": the job stays on loopback)."""
    uid = _lib.UniqueId()
    _check(lib.loom_get_unique_id_toward(toward.encode() if toward else None,
                                         ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), _lib.UNIQUE_ID_BYTES)  # NULs too


def init(init_method=None, size=-1, rank=-1, ranktable=None, unique_id=None):
    """A communicator from one of:
      init("tcp://host:port", size, rank)   rank 0 listens there
      init("env://")                        MASTER_ADDR/PORT, WORLD_SIZE, RANK
      init(ranktable="table.json", rank=r)  an HCCL rank table (with size=n:
                                            it must have n ranks)
      init(unique_id=uid, size=n, rank=r)   an id from get_unique_id()
      init()                                LOOM_RANK_TABLE/RANK_TABLE_FILE and
                                            LOOM_RANK/RANK... (loom_comm_init_env)
    """
    h = ctypes.c_void_p()
    if unique_id is not None:
        if len(unique_id) != _lib.UNIQUE_ID_BYTES:
            raise ValueError("loom: a unique id has %d bytes, not %d"
                             % (_lib.UNIQUE_ID_BYTES, len(unique_id)))
        uid = _lib.UniqueId()
        ctypes.memmove(ctypes.addressof(uid), bytes(unique_id), _lib.UNIQUE_ID_BYTES)
        res = lib.loom_comm_init_rank(ctypes.byref(h), size, ctypes.byref(uid), rank)
    elif ranktable is not None:
        opts = _lib.CommOpts(ctypes.sizeof(_lib.CommOpts), 0.0, max(size, 0))
        res = lib.loom_comm_init_ranktable_opts(str(ranktable).encode(), rank,
                                                ctypes.byref(opts), ctypes.byref(h))
    elif init_method is not None:
        res = lib.loom_comm_init_url(init_method.encode(), size, rank, ctypes.byref(h))
    else:
        res = lib.loom_comm_init_env(ctypes.byref(h))
    _check(res, None)
    return Comm(h.value)


class Comm:
    """A Loom communicator. Every rank calls the same collectives in the same
    order. Each call blocks unless async_op=True (then it returns a Handle)."""

    def __init__(self, handle):
        self._h = handle
        self._stream = None
        self._lock = threading.Lock()

    # -- lifetime
    def close(self):
        """Wait for pending work and free the communicator."""
        h, self._h = self._h, None
        if h:
            if self._stream:
                lib.loom_stream_synchronize(self._stream)
            lib.loom_comm_destroy(h)
            if self._stream:
                lib.loom_stream_destroy(self._stream)
                self._stream = None

    destroy = close

    def abort(self):
        lib.loom_comm_abort(self._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- identity
    def _int(self, fn):
        v = ctypes.c_int()
        _check(fn(self._h, ctypes.byref(v)), self._h)
        return v.value

    @property
    def rank(self):
        return self._int(lib.loom_comm_rank)

    @property
    def size(self):
        return self._int(lib.loom_comm_size)

    @property
    def local_rank(self):
        return self._int(lib.loom_comm_local_rank)

    @property
    def local_size(self):
        return self._int(lib.loom_comm_local_size)

    def split(self, color, key=None):
        """MPI_Comm_split: ranks of one color form a communicator ordered by key
        (default: rank); color < 0 joins none (returns None). Collective."""
        h = ctypes.c_void_p()
        _check(lib.loom_comm_split(self._h, color, self.rank if key is None else key,
                                   ctypes.byref(h)), self._h)
        return Comm(h.value) if h.value else None

    # -- going on after a failure (docs/shrink.md)
    def revoke(self):
        """Fail this rank's pending and later calls, and every other rank's."""
        _check(lib.loom_comm_revoke(self._h), self._h)

    def shrink(self, exclude=(), abort=True, timeout=0.0):
        """A communicator of the live ranks, not in exclude (the same list on
        every calling rank), ranked in order; collective over them. This one
        stays to be closed."""
        ex = (ctypes.c_int * max(len(exclude), 1))(*exclude)
        p = _lib.ShrinkParams(ctypes.sizeof(_lib.ShrinkParams), 1 if abort else 0,
                              ctypes.cast(ex, ctypes.c_void_p), len(exclude), timeout)
        h = ctypes.c_void_p()
        _check(lib.loom_comm_shrink_ext(self._h, ctypes.byref(p), ctypes.byref(h)), None)
        return Comm(h.value)

    # -- plumbing
    def _get_stream(self):
        with self._lock:
            if not self._stream:
                s = ctypes.c_void_p()
                _check(lib.loom_stream_create_host(ctypes.byref(s)))
                self._stream = s.value
            return self._stream

    def _request(self, keep, result):
        req = ctypes.c_void_p()
        _check(lib.loom_request_create(self._get_stream(), None, None, ctypes.byref(req)),
               self._h)
        return Handle(self, req.value, keep, result)

    def _call(self, fn, args, keep, result, async_op):
        if not self._h:
            raise ValueError("loom: the communicator is closed")
        g = getattr(_tls, "group", None)
        # the main thread's blocking calls too go on the stream and are
        # waited for in slices (Handle.wait), so that Ctrl-C interrupts them
        sliced = (g is None and not async_op and
                  threading.current_thread() is threading.main_thread())
        stream = (self._get_stream() if (async_op or sliced or (g and g.async_op))
                  else None)
        _check(fn(*args, self._h, stream), self._h)
        if g is not None:
            g.keep.append(keep)
            if self not in g.comms:
                g.comms.append(self)
            return result
        if async_op:
            return self._request(keep, result)
        if sliced:
            try:
                return self._request(keep, result).wait()
            except LoomError:
                # as a blocking call's, the error stays this call's: the
                # stream's record of it is cleared for the next call
                lib.loom_stream_synchronize(stream)
                raise
        return result

    # -- collectives
    def allreduce(self, buf, op=SUM, out=None, async_op=False):
        """buf reduced across ranks: into buf (in place), or into out."""
        sa, n, dt = _buf(buf, "buf", writable=out is None)
        ra, rn, rdt = _buf(out, "out", True) if out is not None else (sa, n, dt)
        if (rn, rdt) != (n, dt):
            raise ValueError("loom: allreduce: out must match buf in size and dtype")
        return self._call(lib.loom_allreduce, (sa, ra, n, dt, _op(op)), (buf, out),
                          buf if out is None else out, async_op)

    def broadcast(self, buf, root=0, async_op=False):
        a, n, dt = _buf(buf, "buf", True)
        return self._call(lib.loom_broadcast, (a, n, dt, root), (buf,), buf, async_op)

    def allgather(self, buf, out=None, async_op=False):
        """out[r] = rank r's buf; out (size, *buf.shape) is made when not given."""
        sa, n, dt = _buf(buf, "buf")
        if out is None:
            out = _empty(buf, (self.size,) + _shape(buf))
        ra, rn, rdt = _buf(out, "out", True)
        if rn != n * self.size or rdt != dt:
            raise ValueError("loom: allgather: out must hold size x buf of buf's dtype")
        return self._call(lib.loom_allgather, (sa, ra, n, dt), (buf, out), out, async_op)

    def reduce_scatter(self, buf, op=SUM, out=None, async_op=False):
        """Rank r gets block r of the reduction of buf (size equal blocks,
        along the first dimension when it divides, else flat)."""
        sa, n, dt = _buf(buf, "buf")
        size = self.size
        if n % size:
            raise ValueError("loom: reduce_scatter: %d elements do not split into %d "
                             "blocks" % (n, size))
        if out is None:
            shp = _shape(buf)
            shape = ((shp[0] // size,) + shp[1:]) if shp and shp[0] % size == 0 else \
                (n // size,)
            out = _empty(buf, shape)
        ra, rn, rdt = _buf(out, "out", True)
        if rn != n // size or rdt != dt:
            raise ValueError("loom: reduce_scatter: out must hold buf / size of its dtype")
        return self._call(lib.loom_reduce_scatter, (sa, ra, rn, dt, _op(op)), (buf, out), out,
                          async_op)

    def reduce(self, buf, root=0, op=SUM, out=None, async_op=False):
        """The reduction of buf on root: into buf there, or into out (root only)."""
        sa, n, dt = _buf(buf, "buf", writable=out is None)
        ra = None
        if self.rank == root:
            ra, rn, rdt = _buf(out, "out", True) if out is not None else (sa, n, dt)
            if (rn, rdt) != (n, dt):
                raise ValueError("loom: reduce: out must match buf in size and dtype")
        return self._call(lib.loom_reduce, (sa, ra, n, dt, _op(op), root), (buf, out),
                          buf if out is None else out, async_op)

    def barrier(self, async_op=False):
        return self._call(lib.loom_barrier, (), (), None, async_op)

    def alltoall(self, buf, out=None, async_op=False):
        """Block j of buf goes to rank j; block j of out comes from rank j."""
        sa, n, dt = _buf(buf, "buf")
        if n % self.size:
            raise ValueError("loom: alltoall: %d elements do not split into %d blocks"
                             % (n, self.size))
        if out is None:
            out = _empty(buf, _shape(buf))
        ra, rn, rdt = _buf(out, "out", True)
        if (rn, rdt) != (n, dt):
            raise ValueError("loom: alltoall: out must match buf in size and dtype")
        return self._call(lib.loom_alltoall, (sa, ra, n // self.size, dt), (buf, out), out,
                          async_op)

    def gather(self, buf, root=0, out=None, async_op=False):
        """out[r] = rank r's buf on root (made there when not given)."""
        sa, n, dt = _buf(buf, "buf")
        ra = None
        if self.rank == root:
            if out is None:
                out = _empty(buf, (self.size,) + _shape(buf))
            ra, rn, rdt = _buf(out, "out", True)
            if rn != n * self.size or rdt != dt:
                raise ValueError("loom: gather: out must hold size x buf of buf's dtype")
        return self._call(lib.loom_gather, (sa, ra, n, dt, root), (buf, out), out, async_op)

    def scatter(self, buf, out, root=0, async_op=False):
        """Rank r's out = block r of root's buf (buf matters on root only)."""
        ra, n, dt = _buf(out, "out", True)
        sa = None
        if self.rank == root:
            sa, sn, sdt = _buf(buf, "buf")
            if sn != n * self.size or sdt != dt:
                raise ValueError("loom: scatter: buf must hold size x out of out's dtype")
        return self._call(lib.loom_scatter, (sa, ra, n, dt, root), (buf, out), out, async_op)

    # -- point-to-point (not collective)
    def send(self, buf, peer, async_op=False):
        a, n, dt = _buf(buf, "buf")
        return self._call(lib.loom_send, (a, n, dt, peer), (buf,), None, async_op)

    def recv(self, buf, peer, async_op=False):
        a, n, dt = _buf(buf, "buf", True)
        return self._call(lib.loom_recv, (a, n, dt, peer), (buf,), buf, async_op)

    def __repr__(self):
        if not self._h:
            return "<loom.Comm closed>"
        return "<loom.Comm rank %d of %d>" % (self.rank, self.size)
