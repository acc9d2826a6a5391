"""Builds xpuprof's small C parts.

Each extension ``xpuprof._native.<name>`` is built from the sources ``EXTENSIONS`` in
``xpuprof/_native/__init__.py`` lists for it: its own ``xpuprof/_native/<name>.c`` and the shared sources
(``xpuprof/_native/shared/*.c``, each with a declaration-only header) it uses. Symbols are hidden: each
extension exports only its ``PyInit_<name>``, so a shared source compiled into two extensions is two
private copies. The extensions are optional: without a C compiler xpuprof still imports, and what needs
a C part says precisely that it is missing (``xpuprof._native.load``).
"""
import runpy
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import CCompilerError

root = Path(__file__).parent
native = root / "xpuprof" / "_native"
# Read without importing xpuprof (setup.py runs before it is installed).
EXTENSIONS = runpy.run_path(str(native / "__init__.py"))["EXTENSIONS"]
unlisted = sorted(p.name for p in native.glob("*.c") if p.stem not in EXTENSIONS)
if unlisted:
    raise SystemExit(f"setup.py: {', '.join(unlisted)} in xpuprof/_native/ is no extension of EXTENSIONS in "
                     "xpuprof/_native/__init__.py: add it there with its sources")


def _rel(path: Path) -> str:
    return str(path.relative_to(root))


# Link-time optimization for an extension built from several sources: the recorder's hot path (hostrec.c) calls
# into its shared sources (shared/int64log.c, hostmem.c, correlation.c), which LTO inlines as when they were
# headers (callgrind, 4 paired rounds: without it ~4% more instructions per record_function range on average,
# with it within 1% of the header version; the rounds' spread is about 4%). A one-source extension gains nothing.
LTO = "-flto"
headers = [_rel(h) for h in sorted(native.rglob("*.h"))]  # an extension is rebuilt when one changes
extensions = [
    Extension(
        f"xpuprof._native.{name}",
        sources=[_rel(native / source) for source in sources],
        include_dirs=[_rel(native)],
        depends=headers,
        extra_compile_args=["-O2", "-std=c11", "-Wall", "-fvisibility=hidden"] + ([LTO] if len(sources) > 1 else []),
        extra_link_args=[LTO] if len(sources) > 1 else [],
        libraries=["pthread", "dl"],
        optional=True,
    )
    for name, sources in EXTENSIONS.items()
]


class build_py_with_catalogs(build_py):
    """Ship the top-level metrics/ catalogs inside built packages as xpuprof/catalog_data/
    (an editable install reads metrics/ in place)."""

    def run(self):
        super().run()
        source = Path(__file__).parent / "metrics"
        target = Path(self.build_lib) / "xpuprof" / "catalog_data"
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)


class build_ext_lto(build_ext):
    """Each extension with link-time optimization, or, where the compiler or linker has none (clang with a
    linker lacking its LTO plugin), built again without it and said: the same extension, a little slower."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except CCompilerError as exc:
            if LTO not in ext.extra_compile_args:
                raise
            print(f"setup.py: {ext.name} does not build with {LTO} ({str(exc).strip()[:200]}); building it without "
                  "link-time optimization")
            ext.extra_compile_args = [a for a in ext.extra_compile_args if a != LTO]
            ext.extra_link_args = [a for a in ext.extra_link_args if a != LTO]
            force, self.force = self.force, True  # the objects compiled for LTO are not reused
            try:
                super().build_extension(ext)
            finally:
                self.force = force


setup(ext_modules=extensions, cmdclass={"build_py": build_py_with_catalogs, "build_ext": build_ext_lto})
