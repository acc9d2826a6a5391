"""Builds xpuprof's small C parts.

Every ``xpuprof/_native/<name>.c`` becomes the extension module ``xpuprof._native.<name>``.
They are optional: without a C compiler xpuprof still imports, and the backends that need a
C part say precisely that it is missing.
"""
from pathlib import Path

from setuptools import Extension, setup

native = Path(__file__).parent / "xpuprof" / "_native"
extensions = [
    Extension(
        f"xpuprof._native.{src.stem}",
        sources=[str(src.relative_to(Path(__file__).parent))],
        include_dirs=[str(native.relative_to(Path(__file__).parent))],
        extra_compile_args=["-O2", "-std=c11", "-Wall"],
        libraries=["pthread", "dl"],
        optional=True,
    )
    for src in sorted(native.glob("*.c"))
]

setup(ext_modules=extensions)
