# python/local.mk: the loom Python package and the PyTorch backend.
#
# In the build tree the package is $(builddir)/python/loom: the sources
# copied there (for out-of-tree builds), _paths.py naming the build's .libs,
# and loom/torch/_c10d*.so, so that PYTHONPATH=$(builddir)/python works with
# nothing installed. `make install` puts the package in $(LOOM_PYTHONDIR)
# (Debian: $(prefix)/lib/python3.X/dist-packages, on /usr/bin/python3's path
# for /usr/local), its _paths.py naming $(libdir).
LOOM_PY_SRC = python/loom/__init__.py python/loom/_lib.py python/loom/torch/__init__.py \
	python/loom/survive.py
LOOM_TORCH_SRC = python/csrc/ProcessGroupLoom.cpp python/csrc/ProcessGroupLoom.hpp \
	python/csrc/compat.hpp python/csrc/collectives.cpp python/csrc/module.cpp
EXTRA_DIST += $(LOOM_PY_SRC) $(LOOM_TORCH_SRC) python/build_flags.py \
	python/tests/ranks.py python/tests/torch_ranks.py python/tests/test_loom.py \
	python/tests/test_torch_backend.py python/tests/torch_ops.py \
	python/tests/launch.py python/tests/run.sh

if HAVE_PYTHON
all-local: python/.built

LOOM_PY_OUT = python/.built
if HAVE_TORCH
LOOM_TORCH_EXT = python/loom/torch/_c10d$(TORCH_EXT_SUFFIX)
LOOM_TORCH_CXX = $(CXX) $(TORCH_CXXSTD) -O2 -g -fPIC $(LOOM_WARN_CXXFLAGS) \
	-I$(top_srcdir)/include $(TORCH_CPPFLAGS)
# libloom is not linked: loom/__init__.py loads it with RTLD_GLOBAL first
python/csrc/ProcessGroupLoom.o: $(srcdir)/python/csrc/ProcessGroupLoom.cpp \
		$(srcdir)/python/csrc/ProcessGroupLoom.hpp $(srcdir)/python/csrc/compat.hpp \
		$(srcdir)/include/loom.h
	$(AM_V_GEN)$(MKDIR_P) python/csrc && \
	$(LOOM_TORCH_CXX) -c -o $@ $(srcdir)/python/csrc/ProcessGroupLoom.cpp
python/csrc/collectives.o: $(srcdir)/python/csrc/collectives.cpp \
		$(srcdir)/python/csrc/ProcessGroupLoom.hpp $(srcdir)/python/csrc/compat.hpp \
		$(srcdir)/include/loom.h
	$(AM_V_GEN)$(MKDIR_P) python/csrc && \
	$(LOOM_TORCH_CXX) -c -o $@ $(srcdir)/python/csrc/collectives.cpp
python/csrc/module.o: $(srcdir)/python/csrc/module.cpp \
		$(srcdir)/python/csrc/ProcessGroupLoom.hpp $(srcdir)/python/csrc/compat.hpp \
		$(srcdir)/include/loom.h
	$(AM_V_GEN)$(MKDIR_P) python/csrc && \
	$(LOOM_TORCH_CXX) -c -o $@ $(srcdir)/python/csrc/module.cpp
LOOM_TORCH_OBJ = python/csrc/ProcessGroupLoom.o python/csrc/collectives.o python/csrc/module.o
$(LOOM_TORCH_EXT): $(LOOM_TORCH_OBJ)
	$(AM_V_GEN)$(MKDIR_P) python/loom/torch && \
	$(CXX) -shared -o $@ $(LOOM_TORCH_OBJ) $(TORCH_LIBS)
CLEANFILES += $(LOOM_TORCH_OBJ) $(LOOM_TORCH_EXT)
endif

# the sources named in $(srcdir): VPATH would take the build tree's copies
python/.built: $(srcdir)/python/loom/__init__.py $(srcdir)/python/loom/_lib.py \
		$(srcdir)/python/loom/survive.py $(srcdir)/python/loom/torch/__init__.py $(LOOM_TORCH_EXT) Makefile
	$(AM_V_GEN)$(MKDIR_P) python/loom/torch && \
	if test "$(srcdir)" != "."; then \
	  for f in $(LOOM_PY_SRC); do cp "$(srcdir)/$$f" "$$f" || exit 1; done; \
	fi && \
	printf "LIBDIR = '%s'\nWITH_CUDA = %s\n" '$(abs_top_builddir)/.libs' \
	  '$(LOOM_TORCH_CUDA_PY)' >python/loom/_paths.py && touch $@

install-data-local:
	$(MKDIR_P) '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/torch'
	$(INSTALL_DATA) $(srcdir)/python/loom/__init__.py $(srcdir)/python/loom/_lib.py \
	  $(srcdir)/python/loom/survive.py '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/'
	$(INSTALL_DATA) $(srcdir)/python/loom/torch/__init__.py \
	  '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/torch/'
	printf "LIBDIR = '%s'\nWITH_CUDA = %s\n" '$(libdir)' '$(LOOM_TORCH_CUDA_PY)' \
	  >python/_paths.install && \
	$(INSTALL_DATA) python/_paths.install '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/_paths.py'
if HAVE_TORCH
	$(INSTALL_PROGRAM) $(LOOM_TORCH_EXT) '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/torch/'
endif

uninstall-local:
	rm -f '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/__init__.py' \
	  '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/_lib.py' '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/_paths.py' \
	  '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/survive.py' \
	  '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/torch/__init__.py' \
	  '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/torch/_c10d'*.so
	rm -rf '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/__pycache__' \
	  '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/torch/__pycache__'
	-rmdir '$(DESTDIR)$(LOOM_PYTHONDIR)/loom/torch' '$(DESTDIR)$(LOOM_PYTHONDIR)/loom'

clean-local:
	rm -f python/.built python/_paths.install python/loom/_paths.py
	rm -rf python/loom/__pycache__ python/loom/torch/__pycache__ \
	  python/tests/__pycache__ python/tests/.pytest_cache
	if test "$(srcdir)" != "."; then rm -f $(LOOM_PY_SRC); fi
endif

# The package's tests (pytest; each case starts its ranks as processes and
# bounds their time). They SKIP without the package, numpy, pytest or (for
# the backend) torch.
TESTS += python/tests/run.sh
AM_TESTS_ENVIRONMENT += PYTHON3='$(PYTHON3)'; export PYTHON3;

# pip's way in (setup.py): staged `make install`, then `pip install --target`
# of a copy of python/ found through pkg-config, imported from elsewhere.
EXTRA_DIST += python/setup.py python/pyproject.toml python/tests/install.sh
if HAVE_PYTHON
TESTS += python/tests/install.sh
endif
