"""`python -m coil.bench`: see coil.bench.suite for the options."""

import sys

from coil.bench.suite import main

if __name__ == "__main__":
    sys.exit(main())
