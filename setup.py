"""Package layout that pyproject.toml cannot express: the top-level folders shipped inside the wheel.

Everything else (metadata, dependencies, package data patterns) is in pyproject.toml. The repository keeps
``playbooks/`` and ``examples/runs/`` at the top level, where people read and edit them; the wheel carries
them as ``bot/_bundled/playbooks`` and ``bot/_bundled/runs`` so an installed ASAP (the Docker image, a
plain ``pip install``) finds them with no checkout (``bot/resources.py``). ``scripts/wheel_check.sh``
builds the wheel, installs it outside the checkout and runs the commands that need them.
"""

from setuptools import find_namespace_packages, setup

BUNDLED = {"bot._bundled.playbooks": "playbooks", "bot._bundled.runs": "examples/runs"}

setup(
    packages=find_namespace_packages(include=["bot*", "agents*", "integrations*", "knowledge*"],
                                     exclude=["*.__pycache__", "*.__pycache__.*"]) + list(BUNDLED),
    package_dir=BUNDLED,
)
