"""ansible-test's pip bootstrap, from the pip wheel on PyPI (scripts/collection-checks.sh copies it into place).

ansible-test creates each sanity test's virtualenv without pip and runs
`python get_pip_<version>.py --disable-pip-version-check pip==<version> [--no-setuptools] [--no-wheel]`
(bootstrap() in ansible_test/_util/target/setup/requirements.py), where get_pip_<version>.py is pypa's get-pip
script, downloaded from ci-files.testing.ansible.com. That host is not reachable here. This file does what that
script does: it runs pip from the pip wheel that collection-checks.sh downloaded from PyPI beside it (pip runs from
its own wheel on sys.path) and installs the requested packages. --no-setuptools and --no-wheel are get-pip's own
options (install neither); they are dropped here, since nothing else is installed.
"""

import glob
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")


def main() -> None:
    wheels = sorted(glob.glob(os.path.join(HERE, "pip-*-py3-none-any.whl")))
    if not wheels:
        sys.exit(f"no pip wheel beside {__file__}: run scripts/collection-checks.sh sanity")
    sys.path.insert(0, wheels[-1])
    sys.argv = ["pip", "install", *(arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY)]
    runpy.run_module("pip", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
