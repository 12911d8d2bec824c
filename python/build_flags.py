"""build_flags.py - what configure needs to know about a Python and its torch.

usage: python3 build_flags.py pythondir|torch
  pythondir  the package directory relative to the prefix, as this
             interpreter's default scheme lays it out (Debian:
             lib/python3.X/dist-packages, so /usr/local's is on sys.path)
  torch      shell assignments for building the torch extension, or exit 1
             when torch (with torch.distributed) cannot be imported
"""
import re
import sys
import sysconfig


def cxx_std(cpp_extension):
    """The C++ standard torch builds its extensions with (-std=c++14 for
    1.13, c++17 for 2.x): the newest that torch.utils.cpp_extension names."""
    try:
        with open(cpp_extension.__file__, encoding="utf-8") as f:
            found = re.findall(r"-std=c\+\+(\d\d)", f.read())
    except OSError:
        found = []
    return "c++%s" % max(found, key=int) if found else "c++17"


def pythondir():
    base = "/@PREFIX@"
    p = sysconfig.get_path("purelib", vars={"base": base, "platbase": base})
    # Debian's posix_local scheme puts /usr's packages under /usr/local: a
    # prefix's own directory is the same path without that "local/"
    p = p.replace(base + "/local/", base + "/", 1)
    print(p[len(base) + 1:])


def torch_flags():
    try:
        import torch
        import torch.distributed as dist
        from torch.utils import cpp_extension
    except Exception as e:  # noqa: BLE001 - any failure means no torch here
        print("torch_why='%s'" % str(e).replace("'", ""))
        sys.exit(1)
    if not dist.is_available():
        print("torch_why='torch.distributed is not available'")
        sys.exit(1)
    inc = cpp_extension.include_paths()
    inc.append(sysconfig.get_paths()["include"])
    cppflags = " ".join("-isystem " + i for i in inc)
    cppflags += " -D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI)
    libdir = cpp_extension.library_paths()[0]
    print("TORCH_INCDIR='%s'" % inc[0])
    print("TORCH_CPPFLAGS='%s'" % cppflags)
    print("TORCH_LIBS='-L%s -Wl,-rpath,%s -ltorch_python -ltorch -ltorch_cpu -lc10'"
          % (libdir, libdir))
    print("TORCH_EXT_SUFFIX='%s'" % sysconfig.get_config_var("EXT_SUFFIX"))
    print("TORCH_VERSION='%s'" % torch.__version__)
    print("TORCH_CXXSTD='-std=%s'" % cxx_std(cpp_extension))
    print("TORCH_CUDA='%s'" % (torch.version.cuda or ""))


if __name__ == "__main__":
    {"pythondir": pythondir, "torch": torch_flags}[sys.argv[1]]()
