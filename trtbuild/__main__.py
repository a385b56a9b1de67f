"""``python -m trtbuild``: the ``trtbuild`` command line."""

import sys

from trtbuild.cli import main

if __name__ == "__main__":
    sys.exit(main())
