"""Package layout that pyproject.toml cannot express on its own.

Discovery is restricted to ``gpuconsole*`` (the top-level themes/, screenshots/, tests/ and
benchmarks/ folders are not packages), and the top-level ``themes/`` folder is installed inside
the package as ``gpuconsole/themes`` so ``pip install .`` ships the themes.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["gpuconsole", "gpuconsole.*"]) + ["gpuconsole.themes"],
    package_dir={"gpuconsole.themes": "themes"},
)
