"""setup.py - the loom Python package and its PyTorch backend, for pip.

    make install                                  # libloom first (any prefix)
    pip install --no-build-isolation ./python     # then this package

libloom is found with pkg-config (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a
prefix pkg-config does not search). The package records libloom's directory
in loom/_paths.py, so `import loom` works from any directory. The torch
extension (loom.torch) is built when this Python imports torch with its C++
headers (Debian: python3-torch and libtorch-dev), with the flags configure
uses (build_flags.py); LOOM_WITH_TORCH=no leaves it out, =yes makes its
absence an error. CUDA tensors need `make install`'s build of the package.

--no-build-isolation uses the setuptools (and torch) already installed
rather than fetching them. Debian 12's and 13's pip refuse to install into
the system interpreter's directories without --break-system-packages (PEP
668); --target DIR, --prefix DIR or a virtual environment need no such flag.
For a staged install (make install DESTDIR=STAGE), set
PKG_CONFIG_SYSROOT_DIR=STAGE and PKG_CONFIG_PATH to the staged pkgconfig.
"""
import concurrent.futures
import glob
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config"] + list(args) + ["loom"], check=True,
                             capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit("loom setup.py: pkg-config is not installed (apt-get install pkg-config)")
    except subprocess.CalledProcessError as e:
        sys.exit("loom setup.py: pkg-config cannot find libloom (%s); run `make install` "
                 "first and set PKG_CONFIG_PATH to PREFIX/lib/pkgconfig"
                 % (e.stderr.strip() or "exit %d" % e.returncode))
    return out.stdout.strip()


def loom_libdir():
    """The directory holding libloom.so: the -L flag (which carries
    PKG_CONFIG_SYSROOT_DIR), else the .pc file's libdir (pkg-config drops -L
    for the system's own library directories)."""
    for flag in shlex.split(pkg_config("--libs-only-L")):
        return flag[2:]
    return pkg_config("--variable=libdir")


def torch_flags():
    """build_flags.py's assignments for this Python's torch, or None."""
    want = os.environ.get("LOOM_WITH_TORCH", "auto")
    if want == "no":
        return None
    out = subprocess.run([sys.executable, os.path.join(HERE, "build_flags.py"), "torch"],
                         capture_output=True, text=True)
    flags = {}
    for line in out.stdout.splitlines():
        name, _, value = line.partition("=")
        flags[name] = shlex.split(value)[0] if value.strip() else ""
    if out.returncode != 0:
        if want == "yes":
            sys.exit("loom setup.py: LOOM_WITH_TORCH=yes but: %s"
                     % flags.get("torch_why", out.stderr.strip()))
        print("loom setup.py: no torch extension: %s" % flags.get("torch_why", ""))
        return None
    return flags


def cxx_std(flags):
    """The C++ standard torch's headers need: build_flags.py's when it names
    one, else C++17 from torch 2 on (its headers refuse older) and C++14
    before."""
    if flags.get("TORCH_CXXSTD"):
        return flags["TORCH_CXXSTD"]
    major = int(flags["TORCH_VERSION"].split(".")[0])
    return "-std=gnu++17" if major >= 2 else "-std=gnu++14"


LIBDIR = loom_libdir()
VERSION = pkg_config("--modversion")
TORCH = torch_flags()


class BuildPy(build_py):
    """Adds loom/_paths.py naming the installed libloom's directory."""

    def run(self):
        super().run()
        path = os.path.join(self.build_lib, "loom", "_paths.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write("LIBDIR = %r\nWITH_CUDA = False\n" % LIBDIR)


class BuildExt(build_ext):
    def build_extensions(self):
        # the C compiler's C-only warning options would each draw a warning
        for opt in ("-Wstrict-prototypes", "-Werror=implicit-function-declaration"):
            if opt in self.compiler.compiler_so:
                self.compiler.compiler_so.remove(opt)
        # one compiler per source file at once (each torch source takes
        # minutes; setuptools compiles an extension's sources one by one)
        serial = self.compiler.compile

        def compile_parallel(sources, *args, **kwargs):
            with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                done = pool.map(lambda src: serial([src], *args, **kwargs), sources)
                return [obj for objs in done for obj in objs]
        self.compiler.compile = compile_parallel
        super().build_extensions()


ext_modules = []
if TORCH is not None:
    # libloom is not linked: loom/__init__.py loads it with RTLD_GLOBAL first
    ext_modules.append(Extension(
        "loom.torch._c10d",
        sources=sorted(glob.glob(os.path.join("csrc", "*.cpp"))),
        depends=sorted(glob.glob(os.path.join("csrc", "*.hpp"))),
        language="c++",
        extra_compile_args=[cxx_std(TORCH)] + shlex.split(pkg_config("--cflags"))
        + shlex.split(TORCH["TORCH_CPPFLAGS"]),
        extra_link_args=shlex.split(TORCH["TORCH_LIBS"]),
    ))

setup(
    name="loom",
    version=VERSION,
    description="Loom's collectives on numpy arrays and torch tensors, "
    "and its PyTorch backend",
    packages=["loom", "loom.torch"],
    package_dir={"": "."},
    python_requires=">=3.7",
    ext_modules=ext_modules,
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
    zip_safe=False,
)
