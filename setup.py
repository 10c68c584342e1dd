"""Which packages the wheel holds; everything else about the package is in pyproject.toml.

Here, not in pyproject.toml, because the migrations live at the top level (migrations/) but
install inside the package as `app.migrations`, so an installed wheel migrates from any
directory: pyproject.toml's package list is either `find` or a fixed list, never both."""

from setuptools import find_namespace_packages, setup

setup(
    packages=[
        *find_namespace_packages(include=["app*", "graders*", "reference_kernels*"]),
        "app.migrations",
    ],
    package_dir={"app.migrations": "migrations"},
)
