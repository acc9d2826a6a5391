"""Builds xpuprof's small C parts.

Every ``xpuprof/_native/<name>.c`` becomes the extension module ``xpuprof._native.<name>``.
They are optional: without a C compiler xpuprof still imports, and the backends that need a
C part say precisely that it is missing.
"""
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

native = Path(__file__).parent / "xpuprof" / "_native"
extensions = [
    Extension(
        f"xpuprof._native.{src.stem}",
        sources=[str(src.relative_to(Path(__file__).parent))],
        include_dirs=[str(native.relative_to(Path(__file__).parent))],
        depends=[str(h.relative_to(Path(__file__).parent)) for h in sorted(native.glob("*.h"))],  # rebuilt when one changes
        extra_compile_args=["-O2", "-std=c11", "-Wall"],
        libraries=["pthread", "dl"],
        optional=True,
    )
    for src in sorted(native.glob("*.c"))
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


setup(ext_modules=extensions, cmdclass={"build_py": build_py_with_catalogs})
